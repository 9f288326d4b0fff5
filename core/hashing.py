"""Canonical JSON and digests: the one place that decides how a value is hashed."""

from __future__ import annotations

import hashlib
from typing import Any

from core.json_text import encoder

_canonical = encoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""What `json.dumps` with these options builds anew on every call, built once, its C encoder too (core/json_text.py;
it keeps no state between calls): the plan phase hashes every call's input."""


def canonical_json(value: Any) -> str:
    """Sorted keys, no insignificant whitespace, UTF-8 kept: equal values give equal text."""
    return _canonical(value)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_json(value: Any) -> str:
    return sha256_text(canonical_json(value))


def idempotency_key(session_id: str, call_id: str, args_sha256: str) -> str:
    """Stable across resume and fork: derived only from the session, the call and its arguments. It reads
    `<session>:<call>:<args digest prefix>`, so stored keys sort by session (session ids are time-ordered) and
    a person can tell which call it guards."""
    return f"{session_id}:{call_id}:{args_sha256[:16]}"
