"""`strata trust` and `strata config show`, run as real processes with STRATA_HOME and XDG_CONFIG_HOME in the
test's directory: what is trusted and shown, and a malformed file as exit 2 with one line and no traceback."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tests.cli._helpers import error_lines, strata
from tests.config._layout import PROJECT_WITH_EVERYTHING
from tests.conftest import StrataCLI

EXIT_USAGE = 2


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), **extra}


def _project(tmp_path: Path, text: str) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    path = ws / ".strata" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    return ws.resolve(), path.resolve()


def _show(cli: StrataCLI, tmp_path: Path, ws: Path, **env: str) -> dict[str, Any]:
    proc = strata(cli, "config", "show", "--workspace", str(ws), "--json", env=_env(tmp_path, **env))
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.splitlines()
    return json.loads(line)


def test_config_show_json_names_every_source(cli: StrataCLI, tmp_path: Path) -> None:
    """Every setting with its value and source; the untrusted project's hook and allow rule listed as inactive,
    with the one notice."""
    ws, path = _project(tmp_path, PROJECT_WITH_EVERYTHING)
    user = tmp_path / "xdg" / "strata" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('durability = "normal"\n')
    view = _show(cli, tmp_path, ws, STRATA_REPAIR_BUDGET="4")
    assert view["settings"] == {
        "home": {"value": str(cli.home), "source": "environment variable STRATA_HOME"},
        "durability": {"value": "normal", "source": str(user)},
        "max_turns": {"value": 7, "source": str(path)},
        "model": {"value": None, "source": "built-in defaults"},
        "on_ask": {"value": "deny", "source": "built-in defaults"},
        "lock_timeout_s": {"value": 30.0, "source": "built-in defaults"},
        "hook_timeout_s": {"value": 10.0, "source": "built-in defaults"},
        "repair_budget": {"value": 4, "source": "environment variable STRATA_REPAIR_BUDGET"},
        "context_budget_tokens": {"value": 150000, "source": "built-in defaults"},
        "snapshot_every": {"value": 500, "source": "built-in defaults"},
        "drain_grace_s": {"value": 10.0, "source": "built-in defaults"},
        "delegate_max_depth": {"value": 2, "source": "built-in defaults"},
        "delegate_in_daemon": {"value": False, "source": "built-in defaults"},
        "delegate_grants": {"value": False, "source": "built-in defaults"},
        "db": {"value": None, "source": "built-in defaults"},
    }
    assert [(r["action"], r["text"], r["active"]) for r in view["rules"]] == [
        ("deny", "bash(rm *)", True), ("ask", "write_*", True), ("allow", "bash{command='git *'}", False)]
    assert {r["source"] for r in view["rules"]} == {str(path)}
    assert [(h["name"], h["active"]) for h in view["hooks"]] == [
        ("hooks.pre_tool_use[0]", False), ("hooks.stop[0]", False)]
    assert view["files"] == {"user": {"path": str(user), "found": True},
                             "project": {"path": str(path), "found": True, "trust": "untrusted",
                                         "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}}
    (notice,) = view["notices"]
    assert "is not trusted: its 2 hooks and 1 allow rule are ignored" in notice


def test_trust_then_show(cli: StrataCLI, tmp_path: Path) -> None:
    """`strata trust DIR` prints the file, its sha256 and a summary; afterwards everything is active."""
    ws, path = _project(tmp_path, PROJECT_WITH_EVERYTHING)
    proc = strata(cli, "trust", str(ws), env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    out = proc.stdout
    assert f"trusted {path}" in out and f"sha256 {sha}" in out
    assert "2 hooks, 3 rules, 1 setting" in out
    assert "hook pre_tool_use[0] on write_*: python3 check.py (timeout 5s)" in out
    assert "rule 0: allow bash{command='git *'}" in out
    stored = json.loads((cli.home / "trusted_projects.json").read_text())
    assert stored["projects"][str(path)]["sha256"] == sha
    view = _show(cli, tmp_path, ws)
    assert all(r["active"] for r in view["rules"]) and all(h["active"] for h in view["hooks"])
    assert view["notices"] == [] and view["files"]["project"]["trust"] == "trusted"


def test_trust_defaults_to_the_current_directory(cli: StrataCLI, tmp_path: Path) -> None:
    """Without DIR, `strata trust` trusts the current directory's project file; --revoke forgets it."""
    path = tmp_path / ".strata" / "config.toml"
    path.parent.mkdir()
    path.write_text('[[hooks.stop]]\ncommand = "true"\n')
    proc = strata(cli, "trust", env=_env(tmp_path))
    assert proc.returncode == 0 and f"trusted {path.resolve()}" in proc.stdout
    proc = strata(cli, "trust", "--revoke", env=_env(tmp_path))
    assert proc.returncode == 0 and "no longer trusted" in proc.stdout
    assert json.loads((cli.home / "trusted_projects.json").read_text())["projects"] == {}


def test_malformed_project_file_is_exit_2_and_one_line(cli: StrataCLI, tmp_path: Path) -> None:
    """`config show` and `trust` on a malformed file: exit 2, one error line naming file and key, no traceback,
    and nothing trusted."""
    ws, path = _project(tmp_path, '[[policy.rules]]\ntool = "bash"\naction = "allow"\n'
                                  '[[policy.rules]]\ntool = "bash"\naction = "permit"\n')
    for args in (("config", "show", "--workspace", str(ws)), ("trust", str(ws))):
        proc = strata(cli, *args, env=_env(tmp_path))
        assert proc.returncode == EXIT_USAGE, (args, proc.stderr)
        assert proc.stderr.splitlines() == error_lines(proc.stderr)
        (line,) = error_lines(proc.stderr)
        assert line == (f"strata: error: file {path}, key policy.rules[1].action: "
                        "must be one of 'allow', 'ask' or 'deny' (got 'permit')")
        assert proc.stdout == ""
    assert not (cli.home / "trusted_projects.json").exists()


def test_trust_without_project_file_is_a_usage_error(cli: StrataCLI, tmp_path: Path) -> None:
    """Nothing to trust: exit 2 with the path that was looked for."""
    proc = strata(cli, "trust", str(tmp_path / "nothing"), env=_env(tmp_path))
    assert proc.returncode == EXIT_USAGE
    (line,) = error_lines(proc.stderr)
    assert line.startswith("strata: error: no project config at ") and line.endswith("/nothing/.strata/config.toml")


def test_config_show_text_lists_sources_and_activity(cli: StrataCLI, tmp_path: Path) -> None:
    """The human form names each value's source and marks ignored entries."""
    ws, _ = _project(tmp_path, PROJECT_WITH_EVERYTHING)
    proc = strata(cli, "config", "show", "--workspace", str(ws), env=_env(tmp_path, STRATA_MAX_TURNS="12"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(ln.split()[:3] == ["max_turns", "12", "environment"] for ln in (x.strip() for x in lines))
    assert any("allow" in ln and "ignored (project not trusted)" in ln for ln in lines)
    assert any(ln.startswith("notice: project config") for ln in lines)


def test_a_config_integer_too_long_to_read_exits_2_in_one_line(cli: StrataCLI, tmp_path: Path) -> None:
    """A project file holding a 5,000-digit integer: `strata run` and `config show` exit 2 with one line naming the
    file, never an internal error (tomllib's ValueError from Python's int/str digit limit)."""
    ws, path = _project(tmp_path, "max_turns = " + "9" * 5000 + "\n")
    for args in (("config", "show", "--workspace", str(ws)),
                 ("run", "--model", "script:none.json", "--workspace", str(ws), "go")):
        proc = strata(cli, *args, env=_env(tmp_path))
        assert proc.returncode == EXIT_USAGE, proc.stderr
        (line,) = error_lines(proc.stderr)
        assert line == f"strata: error: file {path}: invalid TOML: a number of more than 4300 digits, which cannot " \
                       "be read", line


def test_a_home_with_a_name_longer_than_a_file_name_exits_2_in_one_line(cli: StrataCLI, tmp_path: Path) -> None:
    """STRATA_HOME (or XDG_DATA_HOME) with a part over 255 bytes: every stat of the home fails with ENAMETOOLONG,
    which most commands reported as an internal error. Each says which variable, exit 2, and creates nothing."""
    long_home = str(tmp_path / ("h" * 300))
    for variable, value in (("STRATA_HOME", long_home), ("XDG_DATA_HOME", long_home)):
        env = {**_env(tmp_path), "STRATA_HOME": "", variable: value}
        for args in (("sessions",), ("timeline", "last"), ("run", "--model", "script:none.json", "go")):
            proc = strata(cli, *args, env=env)
            assert proc.returncode == EXIT_USAGE, (args, proc.stderr)
            (line,) = error_lines(proc.stderr)
            assert line == f"strata: error: environment variable {variable}: a part of the path is longer than " \
                           "255 bytes, which no file name can be", line


def test_an_untrusted_project_cannot_pass_a_sessions_grants_to_its_children(cli: StrataCLI, tmp_path: Path) -> None:
    """`delegate_grants = true` lets a child session run, unasked, what a person granted its parent "always": like
    an allow rule, an untrusted project file cannot turn it on (ignored, with a notice); once the person trusts the
    project it applies, and `false` (narrower) applies either way."""
    ws, path = _project(tmp_path, "delegate_grants = true\nmax_turns = 7\n")
    view = _show(cli, tmp_path, ws)
    assert view["settings"]["delegate_grants"] == {"value": False, "source": "built-in defaults"}
    assert view["settings"]["max_turns"] == {"value": 7, "source": str(path)}  # other settings still apply
    (notice,) = view["notices"]
    assert "is not trusted: its delegate_grants = true is ignored" in notice and f"strata trust {ws}" in notice
    proc = strata(cli, "trust", str(ws), env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    trusted = _show(cli, tmp_path, ws)
    assert trusted["settings"]["delegate_grants"] == {"value": True, "source": str(path)}
    assert trusted["notices"] == []
    user = tmp_path / "xdg" / "strata" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text("delegate_grants = true\n", encoding="utf-8")
    path.write_text("delegate_grants = false\n", encoding="utf-8")  # edited, so untrusted again: narrowing applies
    narrowed = _show(cli, tmp_path, ws)
    assert narrowed["settings"]["delegate_grants"] == {"value": False, "source": str(path)}
