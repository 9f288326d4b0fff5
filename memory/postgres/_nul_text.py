"""Text holding NUL characters, on PostgreSQL, whose text values cannot hold one (psycopg refuses the parameter).

A call's output may hold a NUL (a binary file read, `printf '\\0'`), and so may its summary on the timeline, a
model's tool name or call id, a prompt and the title made of it. On SQLite such text is stored as it is; here a
commit holding one failed, the turn ended, and every resume failed the same way: the session was stuck. So text
goes into PostgreSQL through one reversible encoding, and comes back through its inverse, for every text parameter
and every text value read on the store's connections:

- text holding a NUL, or starting with `MARK` (U+FFFF, a noncharacter), is stored as `MARK` followed by the text with
  each `MARK` written `MARK 1` and each NUL `MARK 0`;
- any other text is stored as it is (every row written before this change, and nearly every row after it).

So a stored value starting with `MARK` is always an encoded one, and the rows read back are the very text written:
the chains verify and a copy between stores (`memory/copy.py`) stays exact. SQL that compares a column with a
parameter still matches (both sides are encoded the same way); SQL functions on such a value (`length`, `LIKE`) see
the encoded text, and none of the store's queries uses one on free text."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from psycopg import AsyncConnection, Connection
from psycopg.abc import Buffer
from psycopg.types.string import StrDumperUnknown

MARK = "\uffff"
_NUL_AS, _MARK_AS = MARK + "0", MARK + "1"


def stored(text: str) -> str:
    """`text` as PostgreSQL keeps it (see the module's docstring)."""
    if "\x00" not in text and not text.startswith(MARK):
        return text
    return MARK + text.replace(MARK, _MARK_AS).replace("\x00", _NUL_AS)


def loaded(value: str) -> str:
    """The text `stored` made `value` from."""
    if not value.startswith(MARK):
        return value
    return value[1:].replace(_NUL_AS, "\x00").replace(_MARK_AS, MARK)


class _Dumper(StrDumperUnknown):
    """psycopg's dumper for `str` parameters (type left to the server, as the default one), after `stored`."""

    def dump(self, obj: str) -> Buffer | None:
        return super().dump(stored(obj))


def _rows(cursor: Any) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """psycopg's tuple rows, with each text value `loaded` (checked per value; decoded only where marked)."""
    def make(values: Sequence[Any]) -> tuple[Any, ...]:
        for value in values:
            if type(value) is str and value.startswith(MARK):
                return tuple(loaded(v) if type(v) is str else v for v in values)
        return tuple(values)

    return make


def use_nul_safe_text(conn: Connection[Any] | AsyncConnection[Any]) -> None:
    """Make `conn` store and read text through `stored` and `loaded`."""
    conn.adapters.register_dumper(str, _Dumper)
    conn.row_factory = _rows


async def configure(conn: AsyncConnection[Any]) -> None:
    """The pool's `configure` hook: every connection of the store's pool gets `use_nul_safe_text`."""
    use_nul_safe_text(conn)
