"""`strata timeline ID [--json]` the quick way: the table of a session's rows (or its JSON lines) read straight from
the SQLite file with the standard library (memory/quick_read.py), without the config's models, the store, the event
loop or the logging a full command sets up, so that it answers in about the time the interpreter takes to start.

It answers only what it can answer exactly as the full way (agent/cli/_timeline_full.py) would, and otherwise
says so and leaves the command to the full way, which also reports every error:
- no `STRATA_*` setting in the environment, and the user's config file (if any) holding bytes a full load has
  validated (config/checked.py) and not naming a PostgreSQL store;
- the session named by its id, `last`, or a unique prefix; its workspace's project file (if any) known valid;
- a current database, rows as the store writes them, and `--kind` values the command knows or the session holds;
- for `--json`, which masks the call ids and workspaces it prints: the home's masking key there (the full way
  creates it), the project file naming no secrets (`[secrets]`, `[mcp]`: the full way knows whether they count),
  and no known secret met that the home has not remembered (the full way writes it down): agent/cli/quick_mask.py.
The rows are the same rows (one SQL filter: memory.read_sql.py) drawn by the same code
(agent/cli/timeline_table.py), or made into the same records masked on the way out by the same code
(observability/record_masking.py)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from agent.cli.output import echo_document
from agent.cli.quick_way import answer_quickly
from agent.cli.timeline_table import TIMELINE_KINDS, print_rows
from agent.refs import LAST, MIN_PREFIX
from config.quick import QuickConfig, project_adds_no_secrets, project_known_valid
from core.terminal_text import json_line
from memory.quick_read import QuickRead, SessionRow


def session_of(db: QuickRead, ref: str) -> tuple[SessionRow, int] | None:
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


def quick_timeline(session_ref: str, filters: dict[str, Any], *, as_json: bool = False) -> bool:
    """Print the session's table (or, `as_json`, its rows as JSON lines, masked as the full way masks them) and
    say True, or say False (nothing printed) for the full way to run. A workspace that cannot be looked at
    (ENAMETOOLONG, EACCES, say) is an error the full way reports, as it reports every error."""

    def read(config: QuickConfig, db: QuickRead) -> Callable[[], None] | None:
        found = session_of(db, session_ref)
        if found is None:
            return None
        session, num = found
        known = (project_adds_no_secrets if as_json else project_known_valid)(config.home, session.workspace)
        if not known:
            return None
        kinds = filters["kinds"] or ()
        unknown = [k for k in kinds if k not in TIMELINE_KINDS]
        if unknown and not set(unknown) <= db.kinds_held(num, unknown):
            return None
        if not as_json:
            rows = db.timeline(num, **filters)
            if rows is None:
                return None
            return partial(print_rows, session.id, rows, any(value is not None for value in filters.values()))
        # the masker, and its key file's imports (secrets, hmac, hashlib), only for --json: the table uses none
        # (callgrind: ~7% of `strata timeline ID --kind call --decision denied` on a 100,000-row session)
        from agent.cli.quick_mask import QuickMasker
        from observability.record_masking import mask_record

        masker = QuickMasker.of(config)
        if masker is None:
            return None
        records = db.timeline_records(session.id, num, **filters)
        if records is None:
            return None
        records = [mask_record(record, masker.mask) for record in records]
        if masker.wrote:  # the full way remembers a secret it met (it writes to the home)
            return None
        return partial(_print_records, records)

    return answer_quickly(read)


def _print_records(records: list[dict[str, Any]]) -> None:
    if records:
        echo_document("".join(json_line(record) + "\n" for record in records))
