"""A small PNG reader for tests (8-bit RGB/RGBA, non-interlaced, as Chromium writes screenshots): enough to ask
whether a screenshot shows a picture rather than a blank page, without an imaging library."""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from dataclasses import dataclass

SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    channels: int
    rows: list[bytes]

    def pixel(self, x: int, y: int) -> tuple[int, int, int]:
        i = x * self.channels
        r, g, b = self.rows[y][i:i + 3]
        return r, g, b

    def colours(self, step: int = 3) -> Counter[tuple[int, int, int]]:
        """Colours of every `step`-th pixel of every `step`-th row."""
        out: Counter[tuple[int, int, int]] = Counter()
        for y in range(0, self.height, step):
            row = self.rows[y]
            for x in range(0, self.width, step):
                i = x * self.channels
                out[(row[i], row[i + 1], row[i + 2])] += 1
        return out


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def read_png(data: bytes) -> Image:
    assert data[:8] == SIGNATURE, "not a PNG file"
    pos, idat = 8, []
    width = height = depth = colour = interlace = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    rows: list[bytes] = []
    prev = bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1:
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 0xFF
        elif kind == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev, strict=True))
        elif kind == 3:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                upleft = prev[i - channels] if i >= channels else 0
                line[i] = (line[i] + _paeth(left, prev[i], upleft)) & 0xFF
        else:
            assert kind == 0, f"unknown PNG filter {kind}"
        prev = bytes(line)
        rows.append(prev)
    return Image(width, height, channels, rows)
