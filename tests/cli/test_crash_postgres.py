"""The crash tests on PostgreSQL (issue 17, acceptance 2): `strata run` with `STRATA_DB` naming a PostgreSQL
database, SIGKILLed at each fault point, then `strata resume`: no effect repeated, no result lost, a valid
conversation, exactly the checks tests/cli/test_crash.py makes on SQLite (its script, faults and checks)."""

from __future__ import annotations

import pytest

from tests._in_process_cli import json_lines_in_process
from tests._postgres import Cluster
from tests.cli._helpers import CrashCase, check_invariants, settle
from tests.cli.test_crash import CRASH_SCRIPT, FAULTS, _check_fault_outcome, _new_case, _run_with_fault
from tests.conftest import StrataCLI, write_script

pytestmark = [pytest.mark.slow, pytest.mark.timeout(480)]


@pytest.fixture(scope="module")
def fault_cases(tmp_path_factory: pytest.TempPathFactory, postgres_cluster: Cluster) -> dict[str, CrashCase]:
    base = tmp_path_factory.mktemp("crash-faults-pg")
    cli = StrataCLI(base / "home", base, store_url=postgres_cluster.new_database())
    script = write_script(base / "script.json", CRASH_SCRIPT)
    assert json_lines_in_process(cli, "sessions", "--json") == []  # creates the schema before the parallel runs
    assert not (base / "home" / "strata.db").exists()
    cases = {f"{p}:{n}": _new_case(base, f"{p}-{n}", CRASH_SCRIPT) for p, n in FAULTS}
    from tests.cli._helpers import parallel

    parallel(lambda item: _run_with_fault(cli, script, item[1], item[0]), list(cases.items()))
    settle(list(cases.values()), cli)
    assert not (base / "home" / "strata.db").exists(), "a run wrote to SQLite although STRATA_DB names PostgreSQL"
    return cases


@pytest.mark.parametrize("fault", [f"{p}:{n}" for p, n in FAULTS])
def test_sigkill_at_fault_point_then_resume_on_postgres(fault_cases: dict[str, CrashCase], fault: str) -> None:
    case = fault_cases[fault]
    point, n = fault.split(":")
    _check_fault_outcome(case, point, int(n))
    check_invariants(case)
