"""What `strata reconcile` names when it is not told which receipt (no receipt named, an id that names none, a call
id several sessions share): every receipt awaiting a decision, and only those. A `dispatched` receipt whose owner
process is dead (SIGKILLed mid-call: the outcome is unknown) is one, and reconcile takes it; a `dispatched` receipt
of a session that runs now (a call in flight) is not. An ambiguous id lists its receipts in the wording `strata
receipts` uses (`not applied`, not the stored `failed`). Real `strata run` processes, SIGKILL, a scripted model."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from tests._in_process_cli import json_lines_in_process
from tests.cli._groups import finish, wait_for
from tests.cli._helpers import error_lines, strata, tool_use
from tests.conftest import StrataCLI, write_script

SLEEPS = "echo started >> started; sleep %d"


def _run(cli: StrataCLI, workspace: Path, script: Path) -> subprocess.Popen[str]:
    return cli.popen("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash", "go")


def test_reconcile_names_a_dead_owners_dispatched_receipt_and_never_a_running_sessions(
        cli: StrataCLI, tmp_path: Path) -> None:
    dead_ws, live_ws = tmp_path / "dead", tmp_path / "live"
    dead_ws.mkdir()
    live_ws.mkdir()
    dead_run = _run(cli, dead_ws, write_script(tmp_path / "a.json", [[tool_use("k1", "bash", command=SLEEPS % 3)]]))
    wait_for(dead_ws / "started", dead_run)
    dead_run.send_signal(signal.SIGKILL)  # its receipt stays `dispatched`, its owner dead
    finish(dead_run)
    live_run = _run(cli, live_ws, write_script(tmp_path / "b.json", [[tool_use("k1", "bash", command=SLEEPS % 60)]]))
    try:
        wait_for(live_ws / "started", live_run)
        receipts = json_lines_in_process(cli, "receipts", "--json")
        assert [r["status"] for r in receipts] == ["dispatched", "dispatched"], receipts
        dead, live = receipts  # in the order they were made

        unnamed = strata(cli, "reconcile")
        assert unnamed.returncode == 2, unnamed.stderr
        assert error_lines(unnamed.stderr) and "Traceback" not in unnamed.stderr
        assert f"{dead['id']} (call k1, bash, dispatched; its process is gone" in unnamed.stderr, unnamed.stderr
        assert live["id"] not in unnamed.stderr

        missing = strata(cli, "reconcile", "rcpt_no_such_receipt", "--applied")
        assert missing.returncode == 1, missing.stderr
        assert dead["id"] in missing.stderr and live["id"] not in missing.stderr, missing.stderr

        # the call id both sessions used names the one awaiting a decision: the dead owner's
        decided = strata(cli, "reconcile", "k1", "--not-applied")
        assert decided.returncode == 0, decided.stderr
        assert f"receipt {dead['id']} " in decided.stdout and "dispatched -> not applied" in decided.stdout

        # now neither awaits one: the call id is ambiguous, listed as `strata receipts` words it
        ambiguous = strata(cli, "reconcile", "k1", "--applied")
        assert ambiguous.returncode == 2, ambiguous.stderr
        [line] = [ln for ln in ambiguous.stderr.splitlines() if ln.strip().startswith(dead["id"])]
        assert "  not applied  " in line and "failed" not in line, line
        assert [r["reads"] for r in json_lines_in_process(cli, "receipts", "--json")] == ["not applied", "dispatched"]
        assert "no receipt awaits a decision" in strata(cli, "reconcile").stderr
    finally:
        live_run.send_signal(signal.SIGINT)
        stopped = finish(live_run)
    assert stopped.returncode == 130, stopped.stderr
