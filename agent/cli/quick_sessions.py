"""`strata sessions` the quick way: the listing read straight from the SQLite file with the standard library
(memory/quick_read.py), without the config's models, the store, the state's models or the event loop, so that it
answers in about the time the interpreter takes to start.

It prints exactly what the full way (agent/cli/inspect_cmds.py `list_sessions`) prints, with the same masker (the
home's key, the secrets of the environment and of the user's file, the ones its sessions were seen to hold), the
same order, status and counters: a session's counters are its latest current snapshot's plus what the events
after it add, as restoring its state counts them; an event that is not JSON makes them '?', as there. It takes
the full way (returns False, nothing printed) where it cannot be sure to: see config/quick.py, an event of
another schema version, a database to migrate, any error; and where the full way writes to the home, which the
quick way never does: a home without a masking key (the full way creates it), a known secret in a title that the
home has not remembered yet (the full way appends it to `masking.seen`). One difference is known: a log that is
JSON but does not fold (a second start, a result for a call never proposed) shows the counts its events hold where
the full way shows '?'; `strata show ID` and `strata timeline ID --verify` report such a log."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from agent.cli.quick_mask import QuickMasker
from agent.cli.quick_way import answer_quickly
from agent.cli.session_list import print_sessions, session_view, shown_status
from config.quick import QuickConfig
from core.clock import SystemClock
from memory.liveness import make_liveness
from memory.quick_read import QuickRead
from observability.session_tree import tree_order


def quick_sessions(as_json: bool) -> bool:
    """Print the listing and say True, or say False (nothing printed) for the full way to run."""

    def read(config: QuickConfig, db: QuickRead) -> Callable[[], None] | None:
        quick_masker = QuickMasker.of(config)
        if quick_masker is None:
            return None
        rows = db.session_rows()
        numbers = {rec.id: num for rec, num in rows}
        unknown = db.unknown_receipts()
        masker = quick_masker.masker
        alive = make_liveness(SystemClock())
        by_id = {rec.id: rec for rec, _ in rows}
        awaited = db.awaited_children()
        views: list[dict[str, Any]] = []
        for rec, depth in tree_order([rec for rec, _ in rows]):
            child = by_id.get(awaited.get(rec.id, ""))
            views.append(session_view(rec, shown_status(rec, alive, child), masker, unknown.get(rec.id, 0),
                                      db.counts(numbers[rec.id]), depth=depth))
        if quick_masker.wrote:  # a known secret the home has not remembered yet: the full way remembers it (it writes)
            return None
        return partial(print_sessions, views, as_json)

    return answer_quickly(read)
