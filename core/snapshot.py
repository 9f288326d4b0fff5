"""Snapshots of folded state, so that resume reads one snapshot and the tail of the log instead of the whole log.

A snapshot is a cache of `fold`, not a second restore path: a session is restored by loading the snapshot and
applying every later event with the same `apply` that `fold` uses, which gives exactly `fold` of the whole log
(a property test holds this over generated logs and the golden logs).

A snapshot is trusted only if it was written by this very shape of state. Its version joins `SNAPSHOT_FORMAT`, a
number bumped by hand whenever `apply` changes what it computes from the same events, with a digest of the
state's JSON schema, which changes by itself when a field of the state or of a model it holds changes (a test
pins `STATE_SCHEMA_DIGEST` to the code, so a change to the state cannot slip through unnoticed). A snapshot of
another version, or one that fails to load, is ignored and the whole log is folded instead.

The data is two JSON documents on two lines: the state without its conversation (its head, written and read by
hand, core/snapshot_head.py, so that no process builds a pydantic adapter of the whole state to load or write one),
then the conversation (a list of messages, validated by pydantic). A `StateEncoder` kept by the writer encodes each
message once and reuses its bytes in later snapshots (messages are immutable), so a snapshot costs little more than
the messages added since the last one, however long the conversation the model still sees.

The head's bytes are what `TypeAdapter(SessionState).dump_json` writes (tests/core/test_snapshot_head.py holds them
equal); that adapter is built only for `state_schema_digest`, which a test compares with the pinned digest and no
command runs."""

from __future__ import annotations

import hashlib
import json
from functools import cache

from pydantic import TypeAdapter, ValidationError

from core.messages import Message
from core.snapshot_version import SNAPSHOT_FORMAT as SNAPSHOT_FORMAT
from core.snapshot_version import SNAPSHOT_VERSION as SNAPSHOT_VERSION
from core.snapshot_version import STATE_SCHEMA_DIGEST as STATE_SCHEMA_DIGEST
from core.state import SessionState

DEFAULT_SNAPSHOT_EVERY = 500
"""Events between snapshots."""


class SnapshotError(ValueError):
    """A snapshot that cannot be trusted: another version, unreadable, or not the state it claims to be."""


@cache
def _adapter() -> TypeAdapter[SessionState]:
    """The whole state's adapter: only for its JSON schema (`state_schema_digest`), and as the reference the tests
    hold the hand-written head to."""
    return TypeAdapter(SessionState)


@cache
def _messages() -> TypeAdapter[list[Message]]:
    return TypeAdapter(list[Message])


@cache
def _message() -> TypeAdapter[Message]:
    return TypeAdapter(Message)


class StateEncoder:
    """Encodes successive snapshots of one live state, encoding only the messages it has not encoded before."""

    def __init__(self) -> None:
        self._parts: dict[int, tuple[Message, bytes]] = {}
        """id -> (message, its JSON). Holding the message keeps its id from being reused."""

    def dump(self, state: SessionState) -> bytes:
        parts: dict[int, tuple[Message, bytes]] = {}
        encoded = []
        encode = _message().dump_json
        for message in state.messages:
            hit = self._parts.get(id(message))
            if hit is None or hit[0] is not message:
                hit = (message, encode(message))
            parts[id(message)] = hit
            encoded.append(hit[1])
        self._parts = parts
        from core.snapshot_head import encode_head  # imported where used, as in `load_state`

        head = encode_head(state)
        return head + b"\n[" + b",".join(encoded) + b"]"


def state_schema_digest() -> str:
    schema = json.dumps(_adapter().json_schema(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(schema.encode("utf-8")).hexdigest()[:16]


def dump_state(state: SessionState) -> bytes:
    return StateEncoder().dump(state)


def load_state(data: bytes, version: str, seq: int) -> SessionState:
    """The state a snapshot holds. SnapshotError unless it has this code's version, loads, and is the folded
    state at `seq`."""
    if version != SNAPSHOT_VERSION:
        raise SnapshotError(f"snapshot version {version!r} is not {SNAPSHOT_VERSION!r}")
    head, newline, conversation = data.partition(b"\n")
    if not newline:
        raise SnapshotError("snapshot does not load: no conversation part")
    # Imported here, not at the top: a command that neither loads nor writes a snapshot (the resume of a short
    # session) never builds the head's codec tables.
    from core.snapshot_head import decode_head

    try:
        state = decode_head(head)
        state.messages = _messages().validate_json(conversation)
    except ValidationError as exc:  # a model inside the head, or the conversation
        raise SnapshotError(f"snapshot does not load: {exc.error_count()} error(s)") from None
    except (ValueError, RecursionError) as exc:  # the head is not one encode_head writes
        reason = str(exc).partition("\n")[0]
        raise SnapshotError(f"snapshot does not load: {type(exc).__name__}: {reason}") from None
    if not state.started or state.last_seq != seq:
        raise SnapshotError(f"snapshot at seq {seq} holds the state at seq {state.last_seq}")
    return state
