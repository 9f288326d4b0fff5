"""What a timeline row's JSON record masks on the way out (observability/record_masking.py), the one code the quick
and the full `strata timeline --json` share (tests/cli/test_quick_json.py holds the two to the same bytes)."""

from __future__ import annotations

from observability.record_masking import mask_record


def _mask(text: str) -> str:
    return f"<{text}>"


def test_the_call_id_and_a_lifecycle_rows_workspace_are_masked_and_nothing_else() -> None:
    record = {"seq": 3, "kind": "lifecycle", "call_id": "toolu_1", "summary": "started",
              "data": {"workspace": "/w", "mode": "headless"}}
    assert mask_record(record, _mask) == {"seq": 3, "kind": "lifecycle", "call_id": "<toolu_1>",
                                          "summary": "started", "data": {"workspace": "</w>", "mode": "headless"}}


def test_a_record_without_a_call_id_or_a_workspace_is_left_as_it_is() -> None:
    record = {"seq": 1, "kind": "turn", "call_id": None, "data": {"workspace": 7}}
    assert mask_record(dict(record), _mask) == record
