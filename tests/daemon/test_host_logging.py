"""The host's log lines: each session's lines carry its own id, bound in its own task (never process-wide), and the
host configures no logging itself (the entry point does)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import structlog

from observability import configure_logging
from observability.logging import reset_logging
from tests.daemon._support import host_on, is_result, read_until, script, text, tool_use


@pytest.fixture
def logging_on() -> Iterator[None]:
    configure_logging(False)  # as an entry point does; the runtime adds the home's log file
    try:
        yield
    finally:
        reset_logging()


async def test_each_hosted_sessions_log_lines_carry_its_own_id_and_the_callers_context_stays_clean(
        logging_on: None, strata_home: Path, tmp_path: Path) -> None:
    """Two sessions run turns at the same time, each with calls denied by the scope check: every `call denied`
    line in the home's log names the session whose call it was, and the task that asked the host for the
    sessions has no session id bound."""
    ids: dict[str, str] = {}
    async with host_on(strata_home) as (_, host):
        attachments = []
        for name in ("a", "b"):
            ws = tmp_path / f"ws-{name}"
            ws.mkdir()
            model = script(tmp_path / f"{name}.json",
                           *[[tool_use(f"{name}{i}", "write_file", path="../outside.txt", content="x")]
                             for i in range(3)], [text("denied thrice")])
            sid = await host.new_session(workspace=ws, model=model)
            ids[sid] = name
            attachments.append(await host.attach(sid, "drive"))
        for attachment in attachments:
            await host.prompt(attachment, "try")
        assert "session_id" not in structlog.contextvars.get_contextvars()
        async with anyio.create_task_group() as tg:
            for attachment in attachments:
                tg.start_soon(read_until, attachment, is_result)
        for attachment in attachments:
            assert attachment.attached
        (info_a, info_b) = await host.status()
        assert {info_a.session_id, info_b.session_id} == set(ids)
    lines = [json.loads(line) for line in (strata_home / "logs" / "strata.log").read_text().splitlines()]
    denied = [line for line in lines if line.get("event") == "call denied"]
    assert len(denied) == 6
    for line in denied:
        assert ids[line["session_id"]] == line["call_id"][0]
    hosted = [line for line in lines if line.get("event") == "session hosted"]
    assert sorted(line["session_id"] for line in hosted) == sorted(ids)
