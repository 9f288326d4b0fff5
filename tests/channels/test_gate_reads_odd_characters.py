"""The action-required gate reads a channel message as a person sees it: a request hidden by zero-width characters,
full-width letters or Cyrillic lookalikes still makes a task, and a negation or question written with them is not
dropped, leaving a task behind (a real `strata serve` process with a scripted model, real spool files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.channels._support import tasks_made_from
from tests.conftest import StrataCLI

pytestmark = pytest.mark.slow

MESSAGES = {
    "hidden-zw": "Se\u200bnd the in\u200dvoice",
    "hidden-wide": "\uff52\uff45\uff56\uff49\uff45\uff57 \uff54\uff48\uff45 \uff52\uff45\uff50\uff4f\uff52\uff54",
    "hidden-cyrillic": "Pl\u0435as\u0435 s\u0435nd th\u0435 invoic\u0435",
    "harmless-wide-negation": "\uff4e\uff45\uff56\uff45\uff52 send the invoice",
    "harmless-wide-question": "\uff57\uff48\uff59 review the report?",
    "harmless-zw-chat": "g\u200bood job on the re\u200bport \ufeff",
}


def test_odd_characters_neither_hide_a_request_nor_make_harmless_text_a_task(cli: StrataCLI, tmp_path: Path) -> None:
    tasks = tasks_made_from(cli, tmp_path, MESSAGES)
    assert tasks == {"hidden-zw": "imperative", "hidden-wide": "imperative", "hidden-cyrillic": "imperative"}, tasks
