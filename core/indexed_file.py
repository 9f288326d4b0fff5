"""A file of marshalled entries, each found by an integer key and read only when asked for.

The start-up caches (core/code_cache.py, core/pattern_cache.py) keep hundreds to thousands of entries in one file
(a development checkout, where the tests import every module, holds ~2,800 compiled sources), of which a command
uses a few hundred. Unmarshalling the whole file as one mapping made every start pay for every entry: ~1 MB
copied and ~5,500 objects made, 3-5 ms of CPU in a fresh process. Here a start reads the file's bytes (no
parsing) and a small index of integers; an entry is sliced out and unmarshalled when its key is looked up.

Layout: `magic`, the index's length (4 bytes, little-endian), the index (a marshalled `dict[int, int]`: key to
`offset << 32 | length`, offsets counted from the end of the index), then the entries, each a marshalled value.
A key is a digest of what the entry stands for (a source text, a pattern): the caller stores that text in the
entry too and checks it when the entry is read, so a key two texts share only costs a compile. Damage of any kind
(a short file, an index that is not such a mapping, an entry out of bounds) reads as missing entries, never as an
error: the caller compiles anew and the next save writes a whole new file."""

from __future__ import annotations

import marshal
import zlib

_LENGTH = 4


def text_key(text: str | bytes, extra: int = 0) -> int:
    """A key for `text` (with `extra`, a pattern's flags say): its CRC-32 and its length in UTF-8 (lone surrogates
    passed through), the same in every process and every Python."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    return zlib.crc32(data, extra & 0xFFFFFFFF) | len(data) << 32


class IndexedFile:
    """The entries of one file, as read (empty for a missing, foreign or damaged file)."""

    __slots__ = ("_base", "_index", "_raw")

    def __init__(self, raw: bytes = b"", index: dict[int, int] | None = None, base: int = 0) -> None:
        self._raw = raw
        self._index: dict[int, int] = {} if index is None else index
        self._base = base

    @classmethod
    def parse(cls, raw: bytes, magic: bytes) -> IndexedFile:
        """The file whose bytes are `raw` if it starts with `magic` and has a readable index; empty otherwise."""
        if not raw.startswith(magic):
            return cls()
        start = len(magic) + _LENGTH
        base = start + int.from_bytes(raw[len(magic):start], "little")
        if len(raw) < base:
            return cls()
        try:
            index = marshal.loads(raw[start:base])
        except (ValueError, EOFError, TypeError):
            return cls()
        return cls(raw, index, base) if type(index) is dict else cls()

    def get(self, key: int) -> bytes | None:
        """The marshalled entry of `key`, or None (no such entry, or one the file does not hold whole)."""
        place = self._index.get(key)
        if type(place) is not int or place < 0:
            return None
        start = self._base + (place >> 32)
        end = start + (place & 0xFFFFFFFF)
        return self._raw[start:end] if end <= len(self._raw) else None

    def entry_keys(self) -> list[int]:
        return [key for key in self._index if type(key) is int]

    def __len__(self) -> int:
        return len(self._index)


def build(magic: bytes, entries: dict[int, bytes]) -> bytes:
    """The bytes of a file holding `entries` (each already marshalled), as `IndexedFile.parse` reads them."""
    index: dict[int, int] = {}
    offset = 0
    for key, entry in entries.items():
        index[key] = offset << 32 | len(entry)
        offset += len(entry)
    head = marshal.dumps(index)
    return b"".join((magic, len(head).to_bytes(_LENGTH, "little"), head, *entries.values()))
