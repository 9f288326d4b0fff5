"""Acceptance 6 of the serve daemon (issue 10): the throughput bench runs (small sizes) against a real `strata
serve` process and a real socket, its JSON is well-formed, its figures plausible, and every call it counted is
in the store afterwards (the timeline of each of its sessions, verified)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process, run_in_process, show_in_process
from tests.conftest import REPO, StrataCLI

pytestmark = pytest.mark.slow

BENCH = REPO / "bench" / "daemon_throughput.py"


def test_the_daemon_bench_small_reports_well_formed_plausible_figures_and_every_call_is_durable(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    cli = StrataCLI(home, tmp_path)
    proc = subprocess.run([sys.executable, str(BENCH), "--small", "--json", "--home", str(home)], cwd=tmp_path,
                          env=cli.env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.splitlines()  # --json: one object, nothing else on stdout
    report = json.loads(line)

    calls = report["calls_per_session"]
    assert calls >= 1 and report["rounds"] >= 1
    assert [s["sessions"] for s in report["sizes"]] == [1, 4]
    for size in report["sizes"]:
        n = size["sessions"]
        assert size["calls"] == n * calls  # per round: every session made every call
        assert len(size["session_ids"]) == len(set(size["session_ids"])) == n
        assert size["seconds"] > 0 and size["calls_per_s"] == pytest.approx(size["calls"] / size["seconds"], rel=0.01)
        assert 0 < size["fsyncs"] <= size["commits"]
        assert size["commits_per_fsync"] >= 1
        # a read-only batch is two commits (the batch, its results) and a round of one call per batch has more
        # batches than anything else: at least two commits per call, each session's own
        assert size["commits"] >= 2 * size["calls"]
        assert size["cpu_us_per_call"] >= 0 and size["client_cpu_us_per_call"] >= 0
        assert size["wall_us_per_call"] == pytest.approx(size["seconds"] / size["calls"] * 1e6, rel=0.01)
    assert report["speedups"]["1"] == 1.0 and report["speedups"]["4"] > 0
    assert report["summary"][-1].startswith("sessions_1=") and "speedup_4=" in report["summary"][-1]
    assert report["machine"]["cpus"] >= 1 and len(report["load_average_before"]) == 3

    # every call the bench counted is in the store: one `call` row with outcome ok per call, chain verified (read
    # in this process: tests/_in_process_cli.py)
    for size in report["sizes"]:
        for sid in size["session_ids"]:
            rows = json_lines_in_process(cli, "timeline", sid, "--kind", "call", "--json")
            assert len(rows) == calls * report["rounds"], sid
            assert all(r["outcome"] == "ok" and r["tool"] == "read_file" for r in rows), rows
            assert show_in_process(cli, sid)["session"]["status"] == "completed"
    verify = run_in_process(cli, "timeline", report["sizes"][-1]["session_ids"][-1], "--verify", "--json")
    assert verify.returncode == 0 and json.loads(verify.stdout)["ok"] is True, verify.stdout
