"""The PostgreSQL bench (issue 17, goal 5) runs at small sizes against a real throwaway cluster and prints its
three lines with plausible figures."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests._system import POSTGRES
from tests.conftest import REPO

pytestmark = pytest.mark.slow


def test_the_postgres_bench_small_prints_calls_per_second_and_restore_times() -> None:
    POSTGRES.require()
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "postgres.py"), "--calls", "5", "--rounds", "1",
                           "--events", "1000"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    *_, sqlite, postgres, restore = proc.stdout.strip().splitlines()
    for line, name in ((sqlite, "sqlite"), (postgres, "postgres")):
        found = re.fullmatch(rf"calls_per_s {name} 1=([\d.]+) 2=([\d.]+) 4=([\d.]+)", line)
        assert found, line
        assert all(float(v) > 0 for v in found.groups())
    found = re.fullmatch(r"restore_ms_1k sqlite=([\d.]+) postgres=([\d.]+)", restore)
    assert found and all(float(v) > 0 for v in found.groups()), restore
