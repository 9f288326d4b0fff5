"""The heads file's line (agent/evidence_ledger.py `head_line`), written field by field for a head of exact types,
is the very text `json.dumps` writes of the row, whatever the session id and hashes hold (non-ASCII, controls,
quotes); a head holding values of other types (built around validation) goes through the encoder and is the same
text too."""

from __future__ import annotations

import json
import warnings
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.evidence_ledger import ROW_VERSION, head_line
from core.chain import ChainHead
from core.clock import iso


class _Text(str):
    pass


def _expected(session_id: Any, head: ChainHead, now: datetime) -> str:
    return json.dumps({"v": ROW_VERSION, "kind": "head", "session_id": session_id, **head.model_dump(),
                       "observed_at": iso(now)}) + "\n"


@settings(max_examples=500, deadline=None)
@given(session_id=st.text(), seqs=st.tuples(st.integers(), st.integers()), hashes=st.tuples(st.text(), st.text()),
       now=st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)))
def test_a_head_line_is_the_text_json_writes(session_id: str, seqs: tuple[int, int], hashes: tuple[str, str],
                                             now: datetime) -> None:
    head = ChainHead(events_seq=seqs[0], events_hash=hashes[0], timeline_seq=seqs[1], timeline_hash=hashes[1])
    assert head_line(session_id, head, now) == _expected(session_id, head, now)


def test_a_head_of_other_types_is_written_by_the_encoder_the_same_way() -> None:
    now = datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=2)))
    for odd in ({"events_seq": True}, {"events_hash": _Text("ab")}, {"timeline_seq": 2.5}, {"timeline_hash": None}):
        fields: dict[str, Any] = {"events_seq": 3, "events_hash": "a" * 64, "timeline_seq": 5,
                                  "timeline_hash": "b" * 64, **odd}
        head = ChainHead.model_construct(**fields)
        with warnings.catch_warnings():  # pydantic warns that it serialises an unexpected type: both paths do
            warnings.simplefilter("ignore")
            assert head_line("s", head, now) == _expected("s", head, now)
    head = ChainHead(events_seq=1, events_hash="h", timeline_seq=2, timeline_hash="t")
    assert head_line(_Text("sé"), head, now) == _expected(_Text("sé"), head, now)
