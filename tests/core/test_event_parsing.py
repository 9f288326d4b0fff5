"""`parse_event_json` (core/events.py) validates an event with its own kind's class instead of the union of every
kind: the result, and every refusal word for word, are the union's (`EventAdapter`)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from core.events import EventAdapter, parse_event_json, storable_json
from tests.core.test_fold import GOLDEN_CASES, read_log


def _outcome(parse: Any, data: str | bytes) -> tuple[str, Any]:
    try:
        return "ok", parse(data)
    except ValidationError as exc:
        return "refused", (exc.title, exc.errors(include_url=False), str(exc))


def test_every_stored_event_of_the_golden_logs_reads_back_as_the_union_reads_it() -> None:
    kinds = set()
    for name in GOLDEN_CASES:
        for stored in read_log(name):
            for text in (storable_json(stored.event), stored.event.model_dump_json()):
                for data in (text, text.encode("utf-8")):
                    parsed = parse_event_json(data)
                    assert type(parsed) is type(stored.event) and parsed == stored.event
                    assert parsed == EventAdapter.validate_json(data)
            kinds.add(stored.event.kind)
    assert len(kinds) >= 8  # the logs hold most kinds: starts, messages, batches, results, parks, resumes, ends


@pytest.mark.parametrize("data", [
    '{"kind":"user_message","text":5}',  # a field of the wrong type
    '{"kind":"user_message","text":"hi","extra":1}',  # a key the kind does not have
    '{"kind":"user_message"}',  # a missing field
    '{"kind":"no_such_kind","text":"hi"}',  # no such kind
    '{"kind":"user_message","text":"hi","kind":"session_ended"}',  # the tag given twice: the last one counts
    '{"kind":"session_ended","status":"completed","kind":"user_message","text":"hi"}',
    '{"kind":"user\\u005fmessage","text":"hi"}',  # the tag escaped: not read from the text, still the union's
    '{"text":"hi","kind":"user_message"}',  # the tag not first
    '{"kind":"user_message","text":"hi"',  # not JSON
    '{"kind":"session_ended","status":"lost"}',
    '{"kind":"',
    '[]',
    '',
])
def test_a_damaged_or_unusual_event_gets_the_unions_result_or_its_very_error(data: str) -> None:
    expected = _outcome(EventAdapter.validate_json, data)
    assert _outcome(parse_event_json, data) == expected
    assert _outcome(parse_event_json, data.encode("utf-8")) == _outcome(EventAdapter.validate_json,
                                                                       data.encode("utf-8"))


def test_each_kind_tag_names_the_class_whose_kind_it_is() -> None:
    from core.events import _BY_KIND

    for kind, cls in _BY_KIND.items():
        assert cls.model_fields["kind"].default == kind
        assert json.loads(cls.model_construct().model_dump_json(include={"kind"})) == {"kind": kind}
