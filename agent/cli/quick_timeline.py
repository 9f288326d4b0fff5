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
from datetime import datetime
from typing import Any

from agent.cli.timeline_table import TIMELINE_KINDS, print_rows
from agent.refs import LAST, MIN_PREFIX
from config.quick import project_known_valid
from memory.quick_read import FoundSession, QuickRead, open_home


def _session(db: QuickRead, ref: str) -> FoundSession | None:
    ref = ref.strip()
    if ref == LAST:
        every = db.sessions()
        return max(every, key=lambda s: (datetime.fromisoformat(s.updated_at), s.id)) if every else None
    found = db.sessions(exact=ref)
    if not found and len(ref) >= MIN_PREFIX:
        found = db.sessions(prefix=ref)
    return found[0] if len(found) == 1 else None


def quick_timeline(session_ref: str, filters: dict[str, Any]) -> bool:
    """Print the session's table and say True, or say False (nothing printed) for the full way to run."""
    opened = open_home()
    if opened is None:
        return False
    config, db = opened
    try:
        session = _session(db, session_ref)
        if session is None or not project_known_valid(config.home, session.workspace):
            return False
        kinds = filters["kinds"] or ()
        unknown = [k for k in kinds if k not in TIMELINE_KINDS]
        if unknown and not set(unknown) <= db.kinds_held(session, unknown):
            return False
        rows = db.timeline(session, kinds=filters["kinds"], tools=filters["tools"], decisions=filters["decisions"],
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
