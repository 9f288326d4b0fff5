"""`strata db copy` into another home's `strata.db`: what the target home gets besides the rows (the seen secrets,
0600), and what a refused copy leaves there (nothing)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cli._helpers import result_line, strata, text
from tests.conftest import StrataCLI, write_script

SECRET = "kq8vZ2mT7xw4Lp9dHs3N"
SECRET_ENV = {"DEPLOY_API_TOKEN": SECRET}


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[StrataCLI, str]:
    """A home with one session whose prompt holds a known secret (so the home remembers it in masking.seen)."""
    base = tmp_path_factory.mktemp("copy_home")
    cli = StrataCLI(base / "home", base)
    script = write_script(base / "turns.json", [[text("done")]])
    run = strata(cli, "run", "--json", "--model", f"script:{script}", f"deploy with {SECRET}", env=SECRET_ENV)
    assert run.returncode == 0, run.stderr
    session_id = str((result_line(run.stdout) or {})["session_id"])
    assert SECRET in (cli.home / "masking.seen").read_text()
    return cli, session_id


def fresh(source: tuple[StrataCLI, str], tmp_path: Path) -> StrataCLI:
    """A copy of the source home, to change without touching the module's."""
    home = tmp_path / "src"
    shutil.copytree(source[0].home, home)
    return StrataCLI(home, tmp_path)


def test_a_copied_home_keeps_the_seen_secrets_private_and_masks_them(source: tuple[StrataCLI, str],
                                                                     tmp_path: Path) -> None:
    cli, session_id = source
    target = tmp_path / "target"
    copied = strata(cli, "db", "copy", "--to", str(target / "strata.db"))
    assert copied.returncode == 0, copied.stderr
    seen = target / "masking.seen"
    assert SECRET in seen.read_text()
    assert seen.stat().st_mode & 0o777 == 0o600
    exported = strata(StrataCLI(target, tmp_path), "export", session_id)
    assert exported.returncode == 0, exported.stderr
    assert SECRET not in exported.stdout
    assert "[MASKED:known_secret:" in exported.stdout


def test_copying_again_adds_only_the_seen_secrets_the_target_lacks(source: tuple[StrataCLI, str],
                                                                 tmp_path: Path) -> None:
    cli, _ = source
    target = tmp_path / "target"
    target.mkdir(mode=0o700)
    (target / "masking.seen").write_text('"already-known-value-1234"\n')
    for _ in range(2):
        copied = strata(cli, "db", "copy", "--to", str(target / "strata.db"))
        assert copied.returncode == 0, copied.stderr
    lines = (target / "masking.seen").read_text().splitlines()
    assert lines == ['"already-known-value-1234"', f'"{SECRET}"']
