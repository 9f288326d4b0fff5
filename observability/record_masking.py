"""What a timeline row's JSON record masks on the way out (`strata timeline --json`, the MCP server's timeline): the
call id (the model chose it) and the workspace a lifecycle row's data names. Rows are masked when written; these
two again when shown, so a row stored with a secret id never shows it, and the workspace reads as `sessions`, `show`
and the exports show it. Standard library only: the quick way (agent/cli/quick_timeline.py) and the full way
(observability/session_timeline.py `shown_record`) both use it, so the two print the same."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def mask_record(record: dict[str, Any], mask: Callable[[str], str]) -> dict[str, Any]:
    """`record` (a row's `timeline_record`) with its call id and a lifecycle row's workspace masked with `mask`."""
    if record.get("call_id"):
        record["call_id"] = mask(record["call_id"])
    data = record.get("data")
    if isinstance(data, dict) and isinstance(data.get("workspace"), str):
        record["data"] = {**data, "workspace": mask(data["workspace"])}
    return record
