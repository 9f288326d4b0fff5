"""Issue 16, goal 4 (storage): a read-only call adds at most 1 KB to the database (blobs excluded) in batches of
8, measured as bench/read_only_call.py measures it: the real loop, a no-op read-only tool, a real SQLite file in
WAL, the file's growth in pages after a full checkpoint (tables and indexes), per call. Batches of one are held
to their figure of this schema (README, "Storage and profile of a read-only call"), so that the bytes a call costs
cannot creep back up unnoticed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

BENCH = REPO / "bench" / "read_only_call.py"


def _bytes_per_call(k: int, tmp: Path) -> float:
    proc = subprocess.run([sys.executable, str(BENCH), "--calls", "400", "--k", str(k), "--no-profile"], cwd=REPO,
                          env={**os.environ, "TMPDIR": str(tmp)}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    found = re.search(r"^bytes_per_read_only_call=([0-9.]+) row_bytes_per_call=([0-9.]+)$", proc.stdout, re.M)
    assert found is not None, proc.stdout
    per_call, row_bytes = float(found[1]), float(found[2])
    assert 0 < row_bytes < per_call, proc.stdout  # the growth holds the rows' values and the b-trees around them
    return per_call


@pytest.mark.parametrize(("k", "bound"), [(8, 1024), (1, 1750)])
def test_a_read_only_call_stays_within_its_storage_bound(k: int, bound: int, tmp_path: Path) -> None:
    per_call = _bytes_per_call(k, tmp_path)
    assert per_call <= bound, f"{per_call:.0f} bytes per read-only call in batches of {k} (bound {bound})"
