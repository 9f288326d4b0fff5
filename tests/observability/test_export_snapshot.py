"""An export reads a session in several queries (the row, the state log, the timeline, the receipts). A commit that
lands between them must not give an export whose state log ends before its timeline (or the other way round):
`load_snapshot` reads again until the session's head did not move while it read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.testing import T0
from core.clock import SteppingClock
from core.events import UserMessage
from core.timeline import TimelineEntry
from memory import SqliteEventStore, Write
from observability.export import load_snapshot
from tests.memory.test_copy import _fill


class _WrittenMeanwhile(SqliteEventStore):
    """The real SQLite store, with another writer's commit landing right after the first state-log read."""

    session_id = ""
    pending = 1

    async def read_events(self, session_id: str, *args: Any, **kwargs: Any) -> Any:
        events = await super().read_events(session_id, *args, **kwargs)
        if self.pending and session_id == self.session_id:
            self.pending -= 1
            await self.commit(session_id, Write(events=[(UserMessage(text="written meanwhile"), 2)],
                                                timeline=[TimelineEntry(kind="lifecycle", turn=2,
                                                                        summary="written meanwhile")]))
        return events


async def test_a_commit_between_the_reads_does_not_split_the_export(tmp_path: Path) -> None:
    store = await _WrittenMeanwhile.open(tmp_path / "strata.db", clock=SteppingClock(start=T0))
    try:
        await _fill(store, "s00", 0)
        store.session_id = "s00"
        snapshot = await load_snapshot(store, "s00")
        head = (await store.chain_record("s00")).head
        assert head is not None and store.pending == 0
        assert snapshot.events[-1].seq == head.events_seq
        assert snapshot.timeline[-1].seq == head.timeline_seq
        assert snapshot.events[-1].event == UserMessage(text="written meanwhile")
    finally:
        await store.close()
