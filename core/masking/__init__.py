"""Masking: the one implementation that keeps secrets and PII out of the ledger, timeline summaries, logs and
exports. A masked value reads `[MASKED:kind:fingerprint]`; the fingerprint is a keyed hash of the raw value, so
equal secrets correlate across rows without being revealed, and a different key gives unrelated fingerprints.

Every detector finds its matches on the whole text first; overlapping spans are merged (the longest names the
kind) and only then replaced, so no secret is ever half masked. Text that is already masked stays as it is: a
`[MASKED:...]` token is never masked again, and a match whose key or value starts inside one is dropped (the
earlier masking already decided about it).

Detector lengths are bounded (about 4 KiB per value, 64 KiB per private key block), which is what lets
`StreamMasker` hold back only a bounded tail: a streamed secret split across chunks never escapes raw.

One module each: the detectors (`_detectors`), the masker (`_masker`), the stream masker (`_stream`), and cutting
text that is masked later (`_cut`)."""

from core.masking._cut import cut_head, cut_tail
from core.masking._detectors import (
    KINDS,
    MASK_TOKEN,
    MIN_ENV_SECRET,
    MIN_KNOWN_SECRET,
    MaskKind,
    is_secret_env_name,
    is_secret_key_name,
)
from core.masking._masker import EXCERPT_MASK_CHARS, Masker
from core.masking._stream import StreamMasker

__all__ = [
    "EXCERPT_MASK_CHARS",
    "KINDS",
    "MASK_TOKEN",
    "MIN_ENV_SECRET",
    "MIN_KNOWN_SECRET",
    "MaskKind",
    "Masker",
    "StreamMasker",
    "cut_head",
    "cut_tail",
    "is_secret_env_name",
    "is_secret_key_name",
]
