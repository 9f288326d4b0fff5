"""A file of marshalled entries, each found by an integer key and read only when asked for.

The start-up caches (core/code_cache.py, core/pattern_cache.py) keep hundreds to thousands of entries in one file
(a development checkout, where the tests import every module, holds ~2,800 compiled sources), of which a command
uses a few hundred. Unmarshalling the whole file as one mapping made every start pay for every entry: ~1 MB
copied and ~5,500 objects made, 3-5 ms of CPU in a fresh process. Here a start reads the file's bytes (no
parsing) and a small index of integers; an entry is sliced out and unmarshalled when its key is looked up.

Layout: `magic`, the index's length (4 bytes, little-endian), the index (a marshalled `dict[int, int]`: key to the
entry's offset, counted from the end of the index), then the entries, each a marshalled value (`marshal.loads`
reads one value and ignores the bytes after it, so an entry needs no length). A key is a digest of what the entry
stands for (a source text, a pattern): the caller stores that text in the entry too and checks it when the entry
is read, so a key two texts share only costs a compile. Damage of any kind (a short file, an index that is not
such a mapping, an offset out of bounds or into the middle of an entry) reads as missing or foreign entries, never
as an error: the caller compiles anew and the next save writes a whole new file."""

from __future__ import annotations

import marshal
import zlib
from collections.abc import Iterator

_LENGTH = 4


def text_key(text: str | bytes, extra: int = 0) -> int:
    """A key for `text` (with `extra`, a pattern's flags say): 30 bits of the CRC-32 of its UTF-8 (lone surrogates
    passed through), the same in every process and every Python; an int Python hashes and compares in one step."""
    data = text if type(text) is bytes else text.encode("utf-8", "surrogatepass")  # type: ignore[union-attr]
    return zlib.crc32(data, extra & 0xFFFFFFFF) & 0x3FFFFFFF


class IndexedFile:
    """The entries of one file, as read (empty for a missing, foreign or damaged file)."""

    __slots__ = ("_entries", "_index")

    def __init__(self, raw: bytes = b"", index: dict[int, int] | None = None, base: int = 0) -> None:
        self._entries = memoryview(raw)[base:]  # sliced per entry without copying
        self._index: dict[int, int] = {} if index is None else index

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

    def get(self, key: int) -> memoryview | None:
        """The bytes from `key`'s entry to the end of the file (`marshal.loads` reads the entry's value from them),
        or None (no such entry, or an offset past the end)."""
        offset = self._index.get(key)
        if type(offset) is not int or not 0 <= offset < len(self._entries):
            return None
        return self._entries[offset:]

    def entry_keys(self) -> list[int]:
        return [key for key in self._index if type(key) is int]

    def values(self) -> Iterator[tuple[int, object]]:
        """Each entry's key and unmarshalled value, a damaged entry left out (a missing offset reads as None): what a
        whole read of the file walks; the caller checks each value's shape and text."""
        for key in self.entry_keys():
            raw = self.get(key)
            try:
                value = marshal.loads(raw) if raw is not None else None
            except (ValueError, EOFError, TypeError):
                continue
            yield key, value

    def merged(self, fresh: dict[int, bytes], used: set[int], max_entries: int) -> dict[int, bytes]:
        """The entries a save writes: this file's, unread, and `fresh`; past `max_entries`, of this file's only the
        `used` ones."""
        keep = self.entries()
        if len(keep) + len(fresh) > max_entries:
            keep = {key: raw for key, raw in keep.items() if key in used}
        keep.update(fresh)
        return keep

    def entries(self) -> dict[int, bytes]:
        """Every entry's own bytes (from its offset to the next entry's, or the end of the file), by key: what a
        save copies into the next file unread."""
        size = len(self._entries)
        places = sorted({place for place in self._index.values() if type(place) is int and 0 <= place < size})
        ends = dict(zip(places, [*places[1:], size], strict=False))  # (no entry: one end, no place)
        return {key: bytes(self._entries[place:ends[place]]) for key, place in self._index.items()
                if type(key) is int and type(place) is int and place in ends}

    def __len__(self) -> int:
        return len(self._index)


def build(magic: bytes, entries: dict[int, bytes]) -> bytes:
    """The bytes of a file holding `entries` (each a whole marshalled value), as `IndexedFile.parse` reads them."""
    index: dict[int, int] = {}
    offset = 0
    for key, entry in entries.items():
        index[key] = offset
        offset += len(entry)
    head = marshal.dumps(index)
    return b"".join((magic, len(head).to_bytes(_LENGTH, "little"), head, *entries.values()))
