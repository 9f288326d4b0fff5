"""`strata receipts [ID] [--json]` the quick way: the receipts read straight from the SQLite file with the standard
library (memory/quick_read.py), without the config's models, the store or the event loop.

It prints exactly what the full way (agent/cli/inspect_cmds.py `list_receipts`) prints: the same rows (one SQL
filter: memory/read_sql.py `receipts_filter`), the same view and lines (agent/cli/receipt_lines.py), masked by the
same masker (agent/cli/quick_mask.py). It takes the full way (returns False, nothing printed) where it cannot be
sure to: see config/quick.py; a session named that does not resolve as the full way resolves it (agent/cli/
quick_timeline.py `session_of`), or whose project file names secrets; a receipt the store would not read; a home
without a masking key or a known secret met that the home has not remembered (the full way writes both); any
error."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from agent.cli.quick_mask import QuickMasker
from agent.cli.quick_timeline import session_of
from agent.cli.quick_way import answer_quickly
from agent.cli.receipt_lines import print_receipts, receipt_fields
from config.quick import QuickConfig, project_adds_no_secrets
from memory.quick_read import QuickRead


def quick_receipts(session_ref: str | None, status: str | None, as_json: bool) -> bool:
    """Print the receipts and say True, or say False (nothing printed) for the full way to run."""

    def read(config: QuickConfig, db: QuickRead) -> Callable[[], None] | None:
        session_id = None
        if session_ref is not None:
            found = session_of(db, session_ref)
            if found is None or not project_adds_no_secrets(config.home, found[0].workspace):
                return None
            session_id = found[0].id
        masker = QuickMasker.of(config)
        if masker is None:
            return None
        views = [receipt_fields(r, masker.masker, r.process) for r in db.receipts(session_id, status)]
        if masker.wrote:  # a known secret the home has not remembered yet: the full way remembers it (it writes)
            return None
        return partial(print_receipts, views, as_json)

    return answer_quickly(read)
