"""Large tool outputs. A result whose output is over the threshold (UTF-8 bytes) keeps a bounded excerpt in the
state log, and the whole output is stored once as a blob keyed by its sha256, in the same commit as the result
event: the log stays small, nothing is lost, and equal outputs share one blob.

The model sees the excerpt and a note naming the blob, never the whole output: a request stays bounded whatever a
tool prints."""

from __future__ import annotations

import hashlib
import json

from core.events import BlobRef, CallResult
from core.masking import cut_head, cut_tail
from core.record import record

BLOB_THRESHOLD = 16 * 1024
"""Outputs over this many UTF-8 bytes are kept as blobs."""
EXCERPT_CHARS = 8_000
"""The excerpt's size in characters (three quarters from the start, one quarter from the end, where errors and
summaries tend to be), at most half the threshold."""


@record
class Blob:
    """A whole output kept apart from its event, by the sha256 of its bytes (stored once however often it recurs)."""

    sha256: str
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)


def note(ref: BlobRef) -> str:
    return f"[full output ({ref.size} bytes) kept as blob sha256:{ref.sha256}]"


def excerpt(text: str, ref: BlobRef, budget: int = EXCERPT_CHARS) -> str:
    head = budget * 3 // 4
    tail = budget - head
    if len(text) - head - tail <= 0:
        return f"{text}\n{note(ref)}"
    # Cut between words (core.masking): the excerpt is stored raw and masked when shown, and half a secret would
    # not look like one.
    first, last = cut_head(text, head), cut_tail(text, tail)
    omitted = len(text) - len(first) - len(last)
    return f"{first}\n[... {omitted} characters not shown ...]\n{last}\n{note(ref)}"


def spill(result: CallResult, threshold: int = BLOB_THRESHOLD) -> tuple[CallResult, Blob | None]:
    """The result as the log keeps it, and the blob to store with it (None when the output is small enough).
    Cheap for small outputs: a string of n characters holds at most 4n UTF-8 bytes, so most are never encoded."""
    if result.blob is not None or len(result.content) * 4 <= threshold:
        return result, None
    data = result.content.encode("utf-8")
    if len(data) <= threshold:
        return result, None
    ref = BlobRef(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    kept = excerpt(result.content, ref, min(EXCERPT_CHARS, threshold // 2))
    return result.model_copy(update={"content": kept, "blob": ref}), Blob(ref.sha256, data)


def chained_blob(kind: str, payload: str) -> BlobRef | None:
    """The blob a stored event's payload names (a `call_result` with a `blob`), read from the payload text as the
    chain holds it; None for any other event, or a payload that does not say (its chain check names it)."""
    if kind != "call_result" or '"blob"' not in payload:
        return None
    try:
        ref = json.loads(payload).get("blob")
        return None if ref is None else BlobRef.model_validate(ref)
    except (ValueError, AttributeError):
        return None


def blob_problem(ref: BlobRef, data: bytes | None) -> str | None:
    """What is wrong with the stored blob `data` for `ref` (None: it is the output the event names)."""
    if data is None:
        return f"blob {ref.sha256} is missing (it was removed)"
    if len(data) != ref.size or hashlib.sha256(data).hexdigest() != ref.sha256:
        return f"blob {ref.sha256} does not hold the output its event names (it was changed)"
    return None
