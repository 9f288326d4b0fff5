"""`strata doctor` reports what works and what does not, one line per check, and never repairs."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import StrataCLI


def test_doctor_on_a_fresh_home_passes_with_warnings(cli: StrataCLI, workspace: Path) -> None:
    """A fresh home: every check is ok or a warning (no API key, no terminal), exit 0."""
    proc = cli.run("doctor", "--workspace", str(workspace), env={"ANTHROPIC_API_KEY": ""})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("ok") and "database" in line and "schema" in line for line in lines)
    assert any(line.startswith("warn") and "ANTHROPIC_API_KEY is not set" in line for line in lines)
    assert lines[-1].startswith("all checks passed")


def test_doctor_reports_a_set_key_that_the_command_took_out_of_its_environment(cli: StrataCLI,
                                                                               workspace: Path) -> None:
    """Every command takes ANTHROPIC_API_KEY out of its environment as it starts (agent/models.py): doctor still
    says it is set, from where it was kept."""
    proc = cli.run("doctor", "--workspace", str(workspace), env={"ANTHROPIC_API_KEY": "sk-fake-doctor-key-0123"})
    lines = proc.stdout.splitlines()
    assert any(line.startswith("ok") and "ANTHROPIC_API_KEY is set" in line for line in lines), proc.stdout


def test_doctor_reports_a_broken_database_and_leaves_it(cli: StrataCLI, workspace: Path) -> None:
    """A file that is not a database is one FAIL line and exit 1; the file is untouched."""
    db = cli.home / "strata.db"
    db.write_bytes(b"not a database at all")
    proc = cli.run("doctor", "--workspace", str(workspace))
    assert proc.returncode == 1
    assert any(line.startswith("FAIL") and "database" in line for line in proc.stdout.splitlines())
    assert db.read_bytes() == b"not a database at all"
    assert "Traceback" not in proc.stderr


def test_doctor_names_a_malformed_config(cli: StrataCLI, workspace: Path) -> None:
    """A bad project config is a FAIL naming the file and the key."""
    (workspace / ".strata").mkdir()
    (workspace / ".strata" / "config.toml").write_text('max_turns = "many"\n')
    proc = cli.run("doctor", "--workspace", str(workspace))
    assert proc.returncode == 1
    fail = [line for line in proc.stdout.splitlines() if line.startswith("FAIL")]
    assert len(fail) == 1 and "config.toml" in fail[0] and "max_turns" in fail[0]
