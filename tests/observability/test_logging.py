"""Logging: JSON lines in a rotating file under the Strata home, bound to the session, turn and call; every event
masked by the runtime's Masker; readable lines on stderr with --verbose; never a crash when the file cannot be
written."""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import structlog

from agent.evidence_ledger import Ledgers
from agent.session import Runtime, start_session
from agent.testing import StrictScriptedModel
from core.clock import SystemClock
from core.ids import IdFactory
from core.log_fields import log_fields
from core.masking import Masker
from core.model.scripted import parse_script
from core.tools import ToolContext, ToolOutput, ToolSpec
from memory import InMemoryEventStore
from observability import attach_home, configure_logging, reset_logging
from tests.conftest import StrataCLI, write_script
from tool_executor import builtin_tools

KEY = b"m" * 32
SECRET = "sk-ant-api03-" + "Zx9_Yw8-Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa" * 2
log = structlog.get_logger("tests.logging")


@pytest.fixture(autouse=True)
def clean_logging() -> Iterator[None]:
    yield
    reset_logging()
    structlog.contextvars.clear_contextvars()


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_file_gets_json_lines_with_bound_ids(strata_home: Path) -> None:
    """Each event is one JSON object with its level, time, logger and the ids bound in context."""
    configure_logging(verbose=False)
    path = attach_home(strata_home, Masker(KEY))
    assert path == strata_home / "logs" / "strata.log"
    with structlog.contextvars.bound_contextvars(session_id="s-1", turn=2, call_id="c-3"):
        log.info("call observed", tool="read_file")
    log.debug("too quiet for the file")
    (line,) = lines(path)
    assert line["event"] == "call observed" and line["level"] == "info" and line["logger"] == "tests.logging"
    assert (line["session_id"], line["turn"], line["call_id"], line["tool"]) == ("s-1", 2, "c-3", "read_file")
    assert line["timestamp"].endswith("Z")


def test_a_plain_records_fields_are_the_events_fields_masked(strata_home: Path) -> None:
    """A module that logs with the standard library (memory/restore.py: `strata show` imports no structlog) gives
    its fields with core/log_fields.py: they are the event's own fields in the file, masked as every field is."""
    configure_logging(verbose=False)
    path = attach_home(strata_home, Masker(KEY))
    assert path is not None
    logging.getLogger("tests.plain").warning("plain event", extra=log_fields(reason=f"key {SECRET}", seq=7))
    (line,) = lines(path)
    assert line["event"] == "plain event" and line["logger"] == "tests.plain" and line["seq"] == 7
    assert SECRET not in json.dumps(line) and line["reason"].startswith("key [MASKED:anthropic_key:"), line
    assert "strata_fields" not in line


async def test_runtime_binds_session_turn_and_call(tmp_path: Path, strata_home: Path, workspace: Path) -> None:
    """A line logged inside a tool handler names the session, the turn and the call without being told."""
    async def handler(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        structlog.get_logger("tests.tool").info("tool ran", tag=args.get("tag"))
        return ToolOutput("ran")

    noisy = ToolSpec("noisy", "logs a line", {"type": "object", "properties": {"tag": {"type": "string"}}},
                     handler, safety="read", effect="read_only")
    configure_logging(verbose=False)
    path = attach_home(strata_home, Masker(KEY))
    assert path is not None
    clock = SystemClock()
    rt = Runtime(store=InMemoryEventStore(), clock=clock, ids=IdFactory(clock), tools=[*builtin_tools(), noisy],
                 masker=Masker(KEY), ledgers=Ledgers(strata_home / "ledger", clock))
    script = [[{"type": "tool_use", "id": "n1", "name": "noisy", "input": {"tag": "a"}},
               {"type": "tool_use", "id": "n2", "name": "noisy", "input": {"tag": "b"}}],
              [{"type": "text", "text": "done"}]]
    live = await start_session(rt, model=StrictScriptedModel(parse_script(script, "t"), name="script:t"),
                               workspace=workspace, mode="headless", rules=[], prompt="go", max_turns=5)
    await live.run()
    await rt.close()

    found = lines(path)
    started = next(line for line in found if line["event"] == "session started")
    assert started["session_id"] == live.id
    ran = sorted((line for line in found if line["event"] == "tool ran"), key=lambda line: line["tag"])
    assert [(r["session_id"], r["turn"], r["call_id"], r["tag"]) for r in ran] == [
        (live.id, 1, "n1", "a"), (live.id, 1, "n2", "b")]


def test_secrets_are_masked_in_every_sink(strata_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Strings, nested values, objects' text, tracebacks and library (stdlib) records are masked before any sink
    sees them."""

    class Holder:
        def __str__(self) -> str:
            return f"Holder({SECRET})"

    configure_logging(verbose=True)
    masker = Masker(KEY)
    path = attach_home(strata_home, masker)
    assert path is not None
    log.warning("leak", token=SECRET, nested={"list": [f"Bearer {SECRET}"]}, password="hunter2pass", obj=Holder())
    logging.getLogger("somelib").warning("connecting to https://user:hunter2pass@db.example/x with %s", SECRET)
    try:
        raise ValueError(f"bad key {SECRET}")
    except ValueError:
        log.exception("it failed")
    err = capsys.readouterr().err
    text = path.read_text()
    for sink in (text, err):
        assert SECRET not in sink and "hunter2pass" not in sink
        assert masker.token("anthropic_key", SECRET) in sink
    first, second, third = lines(path)
    assert first["password"].startswith("[MASKED:secret_field:")
    assert second["logger"] == "somelib" and second["level"] == "warning"
    assert "ValueError: bad key [MASKED:anthropic_key:" in third["exception"]


def test_configured_secret_joins_the_masker(strata_home: Path) -> None:
    """Attaching again with a new masker (configured secrets) swaps it without a second file handler."""
    configure_logging()
    attach_home(strata_home, Masker(KEY))
    path = attach_home(strata_home, Masker(KEY, known_secrets=["plain-words-secret"]))
    assert path is not None
    log.info("said plain-words-secret")
    (line,) = lines(path)
    assert "plain-words-secret" not in line["event"]


def test_rotates_at_the_size_limit(strata_home: Path) -> None:
    """Past max_bytes the file is rotated; at most `backups` old files are kept."""
    configure_logging()
    path = attach_home(strata_home, Masker(KEY), max_bytes=2000, backups=2)
    assert path is not None
    for i in range(200):
        log.info("filler line", n=i, pad="x" * 40)
    files = sorted(p.name for p in path.parent.iterdir())
    assert files == ["strata.log", "strata.log.1", "strata.log.2"]
    for name in files:
        assert (path.parent / name).stat().st_size <= 2000
        lines(path.parent / name)  # whole JSON lines in every file
    assert lines(path)[-1]["n"] == 199
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_verbose_prints_readable_lines(capsys: pytest.CaptureFixture[str]) -> None:
    """--verbose: every level on stderr as readable text; otherwise only warnings and errors."""
    configure_logging(verbose=True)
    log.debug("looking closely", session_id="s-9")
    err = capsys.readouterr().err
    assert "looking closely" in err and "session_id=s-9" in err and "[debug" in err
    assert not err.lstrip().startswith("{")

    configure_logging(verbose=False)
    log.info("routine")
    log.warning("careful")
    err = capsys.readouterr().err
    assert "routine" not in err and "careful" in err


def test_stderr_lines_are_inert_on_a_terminal(strata_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A warning quoting hostile text (an OSC 52 clipboard write, a cursor move) reaches stderr as visible escapes;
    the log file keeps the text as it was, JSON-escaped."""
    configure_logging()
    path = attach_home(strata_home, Masker(KEY))
    assert path is not None
    hostile = "name\x1b]52;c;aGVsbG8=\x07 and \x1b[2Aup"
    log.warning("odd file", path=hostile)
    err = capsys.readouterr().err
    assert "odd file" in err and "\x1b" not in err and "\x07" not in err
    assert "\\x1b]52;c;aGVsbG8=\\x07" in err
    (line,) = lines(path)
    assert line["path"] == hostile


def test_unwritable_home_falls_back_to_stderr(strata_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A home that cannot take the log file: one warning, stderr goes on, nothing raises."""
    (strata_home / "logs").write_text("a file where the log directory should be")
    configure_logging()
    assert attach_home(strata_home, Masker(KEY)) is None
    assert attach_home(strata_home, Masker(KEY)) is None
    log.error("still heard")
    err = capsys.readouterr().err
    assert err.count("cannot write the log file") == 1
    assert "still heard" in err and "Traceback" not in err


def test_failing_file_turns_itself_off(strata_home: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that stops taking writes gives one warning, not a traceback per record."""
    configure_logging()
    path = attach_home(strata_home, Masker(KEY))
    assert path is not None

    def broken(self: object, record: logging.LogRecord) -> bool:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(logging.handlers.RotatingFileHandler, "shouldRollover", broken)
    log.warning("one")
    log.warning("two")
    err = capsys.readouterr().err
    assert err.count("cannot write the log file") == 1
    assert "one" in err and "two" in err and "Logging error" not in err and "Traceback" not in err


def test_cli_verbose_and_log_file(cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """`strata --verbose run` prints readable lines on stderr; the home's log file gets the JSON lines either way."""
    script = write_script(tmp_path / "s.json", [[{"type": "tool_use", "id": "b1", "name": "bash",
                                                  "input": {"command": "echo hi"}}],
                                                [{"type": "text", "text": "done"}]])
    quiet = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "go")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    loud = cli.run("--verbose", "run", "--model", f"script:{script}", "--workspace", str(workspace), "go")
    assert loud.returncode == 0, loud.stderr
    assert "session started" in loud.stderr and "call denied" in loud.stderr and "Traceback" not in loud.stderr
    denied = [line for line in lines(cli.home / "logs" / "strata.log") if line["event"] == "call denied"]
    assert len(denied) == 2
    assert all(d["session_id"] and d["turn"] == 1 and d["call_id"] == "b1" for d in denied)
