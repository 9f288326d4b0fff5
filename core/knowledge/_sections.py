"""Sections: the part of a document a lexical hit quotes, so that a hit carries the text that matched rather
than a whole manual.

A document is cut at Markdown ATX headings (`#` to `######` and a space, outside fenced code blocks); a part over
SECTION_MAX_BYTES is cut further at blank lines, then at line ends, then between characters, into pieces of at
most that size. The hit quotes the section holding the most distinct matched terms (then the most occurrences,
then the first). Pure and deterministic; offsets are UTF-8 bytes of the content."""

from __future__ import annotations

import re
from collections.abc import Iterable

from core.knowledge._terms import tokens

SECTION_MAX_BYTES = 4096
_HEADING = re.compile(r"^#{1,6}(?:[ \t]|$)")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def sections(text: str) -> list[tuple[int, int]]:
    """`[start, end)` byte ranges covering `text` in order, each at most SECTION_MAX_BYTES long."""
    lines = _lines(text)
    blocks: list[list[bytes]] = [[]]
    fenced = False
    for line in lines:
        bare = line.decode("utf-8")
        if _FENCE.match(bare):
            fenced = not fenced
        elif not fenced and _HEADING.match(bare) and blocks[-1]:
            blocks.append([])
        blocks[-1].append(line)
    out: list[tuple[int, int]] = []
    start = 0
    for block in blocks:
        for piece in _fit(block):
            out.append((start, start + len(piece)))
            start += len(piece)
    return [r for r in out if r[1] > r[0]] or [(0, 0)]


def best_section(text: str, terms: Iterable[str]) -> tuple[int, int]:
    """The byte range of the section that holds the most distinct `terms`, then the most occurrences."""
    wanted = set(terms)
    data = text.encode("utf-8")
    best: tuple[int, int] | None = None
    best_score = (-1, -1)
    for start, end in sections(text):
        found = [t for t in tokens(data[start:end].decode("utf-8")) if t in wanted]
        score = (len(set(found)), len(found))
        if score > best_score:
            best, best_score = (start, end), score
    return best or (0, len(data))


def _lines(text: str) -> list[bytes]:
    data = text.encode("utf-8")
    parts = data.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    return [*lines, parts[-1]] if parts[-1] else lines


def _fit(block: list[bytes]) -> list[bytes]:
    """The block as pieces of at most SECTION_MAX_BYTES: whole paragraphs where they fit, else whole lines, else
    a line cut between characters."""
    if sum(len(line) for line in block) <= SECTION_MAX_BYTES:
        return [b"".join(block)]
    paragraphs: list[list[bytes]] = [[]]
    for line in block:
        paragraphs[-1].append(line)
        if not line.strip():
            paragraphs.append([])
    units: list[bytes] = []
    for para in paragraphs:
        joined = b"".join(para)
        if len(joined) <= SECTION_MAX_BYTES:
            units.append(joined)
        else:
            for line in para:
                units.extend(_cut(line))
    pieces: list[bytes] = []
    current = b""
    for unit in units:
        if current and len(current) + len(unit) > SECTION_MAX_BYTES:
            pieces.append(current)
            current = b""
        current += unit
    if current:
        pieces.append(current)
    return pieces


def _cut(line: bytes) -> list[bytes]:
    """A line as pieces of at most SECTION_MAX_BYTES, never splitting a UTF-8 character."""
    out: list[bytes] = []
    while len(line) > SECTION_MAX_BYTES:
        end = SECTION_MAX_BYTES
        while end > 0 and (line[end] & 0xC0) == 0x80:
            end -= 1
        out.append(line[:end])
        line = line[end:]
    if line:
        out.append(line)
    return out
