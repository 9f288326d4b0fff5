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


def test_doctor_warns_about_a_strata_variable_that_strata_does_not_read(cli: StrataCLI, workspace: Path) -> None:
    """A typo'd setting variable (`STRATA_MAXTURNS`) is otherwise silently ignored: doctor names it as a warning,
    with the setting it probably meant. The settings' own variables, the test suite's (`STRATA_REQUIRE_*`,
    `STRATA_SCREENSHOTS`, `STRATA_*_KILL_ROUNDS`), the crash tests' `STRATA_FAULT` and a variable the config names
    (`[secrets] env`) are not warned about; a warning is no problem (exit 0)."""
    config = cli.home / "xdg-config" / "strata" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[secrets]\nenv = ["STRATA_DEPLOY_KEY"]\n', encoding="utf-8")
    env = {"STRATA_MAXTURNS": "5", "STRATA_ZEBRA": "1", "STRATA_MAX_TURNS": "7", "STRATA_REQUIRE_TMUX": "1",
           "STRATA_REQUIRE_POSTGRES": "1", "STRATA_SCREENSHOTS": "1", "STRATA_WORKER_KILL_ROUNDS": "2",
           "STRATA_DEPLOY_KEY": "not-a-real-key-0000", "STRATA_FAULT": "", "ANTHROPIC_API_KEY": ""}
    proc = cli.run("doctor", "--workspace", str(workspace), env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    warned = [line.split(None, 2)[2] for line in proc.stdout.splitlines() if line.startswith("warn  environment")]
    assert warned == ["STRATA_MAXTURNS is set but Strata reads no such variable (did you mean STRATA_MAX_TURNS?)",
                      "STRATA_ZEBRA is set but Strata reads no such variable"], proc.stdout
