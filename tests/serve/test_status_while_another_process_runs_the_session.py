"""`strata serve --status` tells the truth about a hosted session another process runs, against a real daemon,
a real `strata resume` process and the real socket. A session only watched in the daemon lets its lease go after
RELEASE_AFTER_S, so `strata resume ID` may run it from another terminal; the status then said status `active`
beside phase `idle`, as if the daemon were idle with a session it drove. Now its phase is `elsewhere` (another
process holds its lease), in the JSON rows and the table, and `idle` again once that process is done."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import Daemon, allow_in_user_config, lease_owner, script, status, wait_until

pytestmark = pytest.mark.slow


def _row(cli: StrataCLI, sid: str) -> dict[str, object]:
    (row,) = [r for r in status(cli) if r["session_id"] == sid]
    return row


def test_a_hosted_session_another_process_runs_shows_phase_elsewhere_and_idle_after(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    started, release = ws / "started", ws / "release"
    allow_in_user_config(cli, "bash")
    command = f"touch {started}; while [ ! -e {release} ] && [ $SECONDS -lt 300 ]; do sleep 0.05; done; echo done"
    model = script(tmp_path / "s.json", [tool_use("b1", "bash", command=command)], [text("ran")])
    daemon = Daemon(cli)
    resume: subprocess.Popen[str] | None = None
    try:
        client = RawClient(cli.home / "run" / "daemon.sock", timeout=30)
        client.hello()
        sid = client.ask({"type": "new_session", "id": "n", "workspace": str(ws), "model": model})["session_id"]
        assert client.ask({"type": "attach", "id": "w", "session_id": sid, "role": "watch"})["type"] == "ok"
        wait_until(lambda: lease_owner(cli, sid) is None, timeout=10, what="the watched session's lease to go")
        assert _row(cli, sid)["phase"] == "idle"

        resume = cli.popen("resume", sid, "run it", "--json")  # another terminal runs the session
        wait_until(started.exists, timeout=60, what="the other process's command to start")
        row = _row(cli, sid)
        assert (row["status"], row["phase"], row["drivers"], row["turn_running"]) == ("active", "elsewhere", 0,
                                                                                      False), row
        table = cli.run("serve", "--status")
        assert table.returncode == 0, table.stderr
        (line,) = [ln for ln in table.stdout.splitlines() if sid in ln]
        assert "elsewhere" in line, table.stdout
        assert "another process" in table.stdout, table.stdout  # the table says what the phase means

        release.touch()
        out, err = resume.communicate(timeout=60)
        assert resume.returncode == 0, err
        assert [o["status"] for o in map(json.loads, out.splitlines()) if o.get("type") == "result"] == ["completed"]
        row = _row(cli, sid)
        assert (row["status"], row["phase"]) == ("completed", "idle"), row  # its turn ended there
        client.close()
    finally:
        if resume is not None and resume.poll() is None:
            release.touch()
            resume.kill()
            resume.communicate()
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
