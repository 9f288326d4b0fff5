"""Sessions holding many receipts, for the tests of how receipts are listed (tests/memory/test_receipt_listing.py,
test_unknown_receipts_index.py): a session's first write, and its n-th receipt (id, call and idempotency key made
from the session and n, as the executor makes them from the session and call)."""

from __future__ import annotations

from core.events import SessionStarted
from core.hashing import idempotency_key
from memory import NewReceipt, Write


def started(session_id: str) -> Write:
    """The write that creates a session (with `create_session`): its SessionStarted event."""
    return Write(events=[(SessionStarted(session_id=session_id, mode="headless", workspace="/ws",
                                         model="script:test", max_turns=10, plan_digest="p"), 0)])


def receipt_id(session_id: str, n: int) -> str:
    return f"{session_id}-r{n:03d}"


def new_receipt(session_id: str, n: int) -> NewReceipt:
    """The session's n-th receipt, of a `bash` call `call-N`."""
    call = f"call-{n}"
    return NewReceipt(id=receipt_id(session_id, n), call_id=call, tool="bash",
                      idempotency_key=idempotency_key(session_id, call, f"{n:064x}"), args_sha256=f"{n:064x}")
