"""Canonical JSON and digests: the one place that decides how a value is hashed."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Sorted keys, no insignificant whitespace, UTF-8 kept: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_json(value: Any) -> str:
    return sha256_text(canonical_json(value))


def idempotency_key(session_id: str, call_id: str, args_sha256: str) -> str:
    """Stable across resume and fork: derived only from the session, the call and its arguments. It starts
    with the (time-ordered) session id so that stored keys sort by session, and stays short enough for any
    external API's idempotency header."""
    digest = sha256_text(call_id + "\x1f" + args_sha256)[:32]
    return f"{session_id}.{digest}"
