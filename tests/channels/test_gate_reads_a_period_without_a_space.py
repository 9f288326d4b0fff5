"""A careless sender's "Send the invoice.Thanks" (no space after the period, as phones and quick typists leave it)
is the imperative "send the invoice" followed by "thanks": the action-required gate makes it a task, as it does
"Send the invoice. Thanks". A file name ("send invoice_17.pdf") stays one word (a real `strata serve` process with a
scripted model, real spool files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.channels._support import tasks_made_from
from tests.conftest import StrataCLI

pytestmark = pytest.mark.slow

MESSAGES = {
    "m1": "Send the invoice.Thanks",
    "m2": "Please review the report.Thx!",
    "m3": "send invoice_17.pdf",
    "m4": "What is the invoice.Thanks",  # a question stays a question
}


def test_a_request_with_no_space_after_its_period_makes_a_task(cli: StrataCLI, tmp_path: Path) -> None:
    tasks = tasks_made_from(cli, tmp_path, MESSAGES)
    assert tasks == {"m1": "imperative", "m2": "imperative", "m3": "imperative"}, tasks
