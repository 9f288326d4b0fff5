"""The frame every quick way of a reading command runs in (agent/cli/quick_sessions.py, quick_receipts.py,
quick_timeline.py): the home opened as a quick way may open it (memory/quick_read.py `open_home`: the config a
quick way may use, the database read-only with the standard library's sqlite3), the command's reading done, the
database closed, and only then anything printed. Wherever the quick way cannot answer exactly as the full way
would, it answers False with nothing printed, and the command takes the full way, which reports every error: a
home or a config for the full way, a store that is missing, locked or damaged (sqlite3.Error), rows it does not
read as the store writes them (ValueError), a file it cannot look at (OSError), or the reading's own "not sure"."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from config.quick import QuickConfig
from memory.quick_read import QuickRead, open_home

Reading = Callable[[QuickConfig, QuickRead], Callable[[], None] | None]
"""A command's quick reading: given the config and the open database, what prints its answer (called once the
database is closed), or None to leave the command to the full way."""


def answer_quickly(read: Reading) -> bool:
    """Run `read` in the home's database and print its answer: True; or False, nothing printed, for the full way."""
    opened = open_home()
    if opened is None:
        return False
    config, db = opened
    try:
        printing = read(config, db)
    except (sqlite3.Error, ValueError, OSError):  # the full way reports what is wrong
        return False
    finally:
        db.close()
    if printing is None:
        return False
    printing()
    return True
