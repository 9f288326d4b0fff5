"""The ids a session has used, kept small. The plan phase must know every call id of a session (compacted turns
and forks included) to rename a model's id that repeats one, so the set grows with the session and is part of
every snapshot; raw ids there would make a long session's snapshot, and so its resume, grow by ~17 bytes a call.

Each id is kept as its CRC-32 instead, and a snapshot holds them packed, base64-encoded: about 5 bytes a call,
read back in C. Membership can be wrong in one direction only: an id never added may be reported as used (about
n in 4 billion for n ids, or when crafted to collide), which only costs a needless rename; an id that was added
is always reported."""

from __future__ import annotations

import base64
import sys
import zlib
from array import array
from collections.abc import Iterable
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

_WORD = "I" if array("I").itemsize == 4 else "L"
assert array(_WORD).itemsize == 4, "no 32-bit unsigned array type"


def _digest(call_id: str) -> int:
    return zlib.crc32(call_id.encode("utf-8", "surrogatepass"))


class IdDigests:
    def __init__(self, digests: Iterable[int] = ()) -> None:
        self._digests: set[int] = set(digests)

    def add(self, call_id: str) -> None:
        self._digests.add(_digest(call_id))

    def update(self, call_ids: Iterable[str]) -> None:
        self._digests.update(_digest(c) for c in call_ids)

    def __contains__(self, call_id: object) -> bool:
        return isinstance(call_id, str) and _digest(call_id) in self._digests

    def __len__(self) -> int:
        return len(self._digests)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IdDigests) and self._digests == other._digests

    def __repr__(self) -> str:
        return f"IdDigests({len(self._digests)} ids)"

    def encode(self) -> str:
        packed = array(_WORD, self._digests)
        if sys.byteorder == "big":
            packed.byteswap()
        return base64.b64encode(packed.tobytes()).decode("ascii")

    @classmethod
    def decode(cls, text: str) -> IdDigests:
        packed = array(_WORD)
        packed.frombytes(base64.b64decode(text, validate=True))
        if sys.byteorder == "big":
            packed.byteswap()
        return cls(packed)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        """In a snapshot: one base64 string (the packed digests, little-endian)."""
        from_text = core_schema.no_info_plain_validator_function(
            lambda v: v if isinstance(v, IdDigests) else IdDigests.decode(v))
        return core_schema.json_or_python_schema(
            json_schema=core_schema.chain_schema([core_schema.str_schema(), from_text]),
            python_schema=from_text,
            serialization=core_schema.plain_serializer_function_ser_schema(lambda v: v.encode(),
                                                                           when_used="json"))
