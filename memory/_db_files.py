"""The files a WAL-mode SQLite database lives in, as the store's connection opened them, checked at each commit.

SQLite holds `strata.db`, `strata.db-wal` and `strata.db-shm` open for as long as the connection lives and never
looks at their names again. If one of them is deleted or replaced behind its back (a cleanup script, a careless
`rm strata.db-*`), it goes on writing: a deleted WAL takes every later commit with it when the process dies, and
another process opening the home meets files that do not belong together. A connection in WAL mode keeps all
three in place while it is open (the last one to close removes the WAL and shm, and there is no last one while
this one lives), so a name that no longer leads to the file the connection opened means exactly that: something
outside SQLite deleted or replaced it. The store compares the names with what it captured after opening, with one
`stat` per file (a few microseconds), before each COMMIT, and refuses the commit when they differ.

When only the WAL is gone (the database file and the shm are the connection's own), the commits it held are
still readable through the connection, so a checkpoint copies them into the database file (`salvageable`)."""

from __future__ import annotations

import os
from typing import Literal

from core.record import record

SUFFIXES = ("", "-wal", "-shm")

Identity = tuple[int, int] | None
"""(st_dev, st_ino) of a file, or None when the name leads nowhere."""


def _identity(path: str) -> Identity:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


@record
class FilesChanged:
    """The database's files changed under an open connection: which one, and how."""

    path: str
    """The file whose name no longer leads to the connection's file."""
    how: Literal["deleted", "replaced"]
    salvageable: bool
    """Only the WAL was deleted: a checkpoint through the connection can still copy its commits home."""


@record
class DatabaseFiles:
    """The identities of a database's files as a connection opened them, to notice their replacement later."""

    path: str
    identities: tuple[Identity, ...]

    @classmethod
    def capture(cls, path: str) -> DatabaseFiles:
        """Call once the connection has opened the database in WAL mode (all three files then exist)."""
        return cls(path, tuple(_identity(path + suffix) for suffix in SUFFIXES))

    def changed(self) -> FilesChanged | None:
        """The first of the files captured that its name no longer leads to, or None. On the commit path: a
        plain loop of `stat` calls until something differs."""
        for suffix, then in zip(SUFFIXES, self.identities, strict=True):
            if then is not None and _identity(self.path + suffix) != then:
                return self._describe()
        return None

    def _describe(self) -> FilesChanged:
        now = tuple(_identity(self.path + suffix) if then is not None else None
                    for suffix, then in zip(SUFFIXES, self.identities, strict=True))
        db, wal, shm = (a == b for a, b in zip(now, self.identities, strict=True))
        suffix, current = next((s, c) for s, c, same in zip(SUFFIXES, now, (db, wal, shm), strict=True) if not same)
        return FilesChanged(self.path + suffix, "deleted" if current is None else "replaced",
                            salvageable=db and shm and not wal and now[1] is None)
