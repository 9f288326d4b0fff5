"""Path rules hold on every path a call touches (security review, item 3): the real `strata run`, deny rules on
`secrets/*`, and the calls that read secrets/ without naming it as their main argument: grep with only a regex,
grep with `path: secrets`, a recursive glob, a listing of the directory. None may return a secret file's contents
or names; each says how many paths it skipped."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.cli._helpers import call_results, events_of, strata, text, tool_use
from tests.conftest import StrataCLI, write_script

SECRET = "HUNTER2-TOPSECRET-VALUE"


def _workspace(ws: Path) -> None:
    (ws / "secrets").mkdir()
    (ws / "secrets" / "api.key").write_text(f"token = {SECRET}\n")
    (ws / "secrets" / "nested").mkdir()
    (ws / "secrets" / "nested" / "db.txt").write_text(f"password {SECRET}\n")
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text("print('hello')\n")
    (ws / "README.md").write_text("a project\n")


def _run(cli: StrataCLI, ws: Path, calls: list[dict[str, Any]], *rules: str) -> dict[str, dict[str, Any]]:
    script = write_script(ws.parent / "turns.json", [calls, [text("done")]])
    proc = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(ws), "--json", *rules, "look")
    assert proc.returncode == 0, proc.stderr
    return call_results(events_of(proc.stdout))


def _skipped(content: str) -> int:
    found = re.search(r"(\d+) paths? skipped by policy rules", content)
    assert found, content
    return int(found[1])


def test_grep_never_reads_files_under_a_denied_path(cli: StrataCLI, workspace: Path) -> None:
    """The exact attack: with a deny rule on grep(secrets/*), grep{".*"} over the workspace and grep{".*", path:
    secrets} return no secret, and say how many files they skipped."""
    _workspace(workspace)
    results = _run(cli, workspace, [tool_use("g1", "grep", pattern="."),
                                    tool_use("g2", "grep", pattern=".", path="secrets")],
                   "--deny", "grep(secrets/*)")
    everywhere, under = results["g1"], results["g2"]
    assert SECRET not in everywhere["content"] and SECRET not in under["content"]
    assert "src/app.py:1:print('hello')" in everywhere["content"]
    assert _skipped(everywhere["content"]) == 2  # secrets/api.key and the directory secrets/nested
    assert _skipped(under["content"]) == 2
    assert under["status"] == "ok", under


def test_a_path_pattern_meets_greps_path_argument(cli: StrataCLI, workspace: Path) -> None:
    """A deny pattern is matched against grep's `path` (in its resolved forms), not only against its regex."""
    _workspace(workspace)
    results = _run(cli, workspace, [tool_use("g1", "grep", pattern=".", path="secrets/api.key"),
                                    tool_use("g2", "grep", pattern="token", path="./src/../secrets/api.key")],
                   "--deny", "grep(secrets/*)")
    for result in results.values():
        assert result["status"] == "denied" and result["check"] == "policy", result
        assert SECRET not in result["content"]


def test_glob_and_list_dir_skip_denied_paths(cli: StrataCLI, workspace: Path) -> None:
    """`*(secrets/*)` keeps every file tool out: glob and list_dir never name what is under secrets/, grep never
    reads it, read_file is denied; each walk says how many paths it skipped."""
    _workspace(workspace)
    results = _run(cli, workspace, [tool_use("c1", "glob", pattern="**/*"),
                                    tool_use("c2", "list_dir", path="secrets"),
                                    tool_use("c3", "grep", pattern="TOPSECRET"),
                                    tool_use("c4", "read_file", path="secrets/api.key")],
                   "--deny", "*(secrets/*)")
    listed = results["c1"]["content"]
    assert "src/app.py" in listed and "README.md" in listed
    assert "api.key" not in listed and "db.txt" not in listed and "nested" not in listed
    assert _skipped(listed) == 2
    assert "api.key" not in results["c2"]["content"] and "nested" not in results["c2"]["content"]
    assert _skipped(results["c2"]["content"]) == 2
    assert SECRET not in results["c3"]["content"] and _skipped(results["c3"]["content"]) == 2
    assert results["c4"]["status"] == "denied", results["c4"]
    assert all(SECRET not in r["content"] for r in results.values())


def test_a_flag_rule_with_an_unclosed_bracket_is_a_usage_error_as_in_a_config_file(cli: StrataCLI,
                                                                                   workspace: Path) -> None:
    """`--deny 'write_file([abc)'` was taken, and fnmatch matched its `[abc` literally (a rule that denies nothing
    the person meant), while the same glob in a config file is refused. Flags are refused the same way."""
    turns = write_script(workspace.parent / "turns.json", [[text("done")]])
    for flag, rule in (("--deny", "write_file([abc)"), ("--allow", "bash(ls [a-)"), ("--deny", "read_[file")):
        proc = strata(cli, "run", "--model", f"script:{turns}", "--workspace", str(workspace), flag, rule, "go")
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.splitlines()[0] == f"strata: error: invalid {flag} rule '{rule}': a '[' is never " \
                                              "closed by ']'", proc.stderr
    assert strata(cli, "sessions", "--json").stdout == ""
