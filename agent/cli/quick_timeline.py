"""`strata timeline ID` the quick way: the table of a session's rows read straight from the SQLite file with the
standard library (memory/quick_read.py), without the config's models, the store, the event loop or the logging a
full command sets up, so that it answers in about the time the interpreter takes to start.

It answers only what it can answer exactly as the full way (agent/cli/_timeline_full.py) would, and otherwise
says so and leaves the command to the full way, which also reports every error:
- no `STRATA_*` setting in the environment, and the user's config file (if any) holding bytes a full load has
  validated (config/checked.py) and not naming a PostgreSQL store;
- the session named by its id, `last`, or a unique prefix; its workspace's project file (if any) known valid;
- a current database, rows as the store writes them, and `--kind` values the command knows or the session holds.
The rows are the same rows (one SQL filter: memory.read_sql.py) drawn by the same code
(agent/cli/timeline_table.py)."""

from __future__ import annotations

import sqlite3
from typing import Any

from agent.cli.timeline_table import TIMELINE_KINDS, print_rows
from agent.refs import LAST, MIN_PREFIX
from config.quick import project_known_valid
from memory.quick_read import QuickRead, SessionRow, open_home


def _session(db: QuickRead, ref: str) -> tuple[SessionRow, int] | None:
    """The session `ref` names as agent/ids.py `match_session` finds it (every row checked as the full way reads
    them all: `QuickRead.session_rows`); None where that is an error (the full way reports it)."""
    ref = ref.strip()
    if ref == LAST:
        every = db.session_rows()
        return max(every, key=lambda row: (row[0].updated_at, row[0].id)) if every else None
    found = db.session_rows(exact=ref)
    if not found and len(ref) >= MIN_PREFIX:
        found = db.session_rows(prefix=ref)
    return found[0] if len(found) == 1 else None


def quick_timeline(session_ref: str, filters: dict[str, Any]) -> bool:
    """Print the session's table and say True, or say False (nothing printed) for the full way to run."""
    opened = open_home()
    if opened is None:
        return False
    config, db = opened
    try:
        found = _session(db, session_ref)
        if found is None or not project_known_valid(config.home, found[0].workspace):
            return False
        session, num = found
        kinds = filters["kinds"] or ()
        unknown = [k for k in kinds if k not in TIMELINE_KINDS]
        if unknown and not set(unknown) <= db.kinds_held(num, unknown):
            return False
        rows = db.timeline(num, kinds=filters["kinds"], tools=filters["tools"], decisions=filters["decisions"],
                           turn=filters["turn"], since_seq=filters["since_seq"])
    except (sqlite3.Error, ValueError, OSError):  # the full way reports what is wrong (a workspace that cannot be
        # looked at, say: ENAMETOOLONG, EACCES), as it reports every error
        return False
    finally:
        db.close()
    if rows is None:
        return False
    print_rows(session.id, rows, any(value is not None for value in filters.values()))
    return True
