"""Path rules on every path a call touches: how a rule's `pattern` meets path arguments other than the primary one,
and the `PathFilter` the policy step hands to the tools that walk the workspace (they never open or name what it
keeps from them, and count it)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from core.ids import IdFactory
from core.policy import PermissionRule, parse_rule
from core.tools import BoundToolPlan, PathFilter, ToolContext, ToolOutput, ToolSpec
from tool_executor import Deny, Pass, ToolCallProcessor, builtin_tools
from tool_executor.builtin import fs
from tool_executor.checks.policy import path_filter


async def _noop(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
    return ToolOutput("ran")


COPY = ToolSpec("copy", "copy", {"type": "object", "properties": {"src": {"type": "string"},
                                                                  "dst": {"type": "string"}}},
                _noop, safety="write", effect="effectful", path_args=("src", "dst"), primary_arg="src",
                primary_kind="path")


@pytest.fixture
def ws(workspace: Path) -> Path:
    (workspace / "secrets" / "nested").mkdir(parents=True)
    (workspace / "secrets" / "api.key").write_text("token SECRET\n")
    (workspace / "secrets" / "nested" / "db.txt").write_text("password SECRET\n")
    (workspace / "docs").mkdir()
    (workspace / "docs" / "guide.md").write_text("hello docs\n")
    (workspace / "docs" / "key-link").symlink_to(workspace / "secrets" / "api.key")
    return Path(os.path.realpath(workspace))


def _processor(ws: Path) -> ToolCallProcessor:
    return ToolCallProcessor(BoundToolPlan([*builtin_tools(), COPY], "headless"), workspace=ws, ids=IdFactory())


def _rules(*specs: str) -> list[PermissionRule]:
    return [parse_rule("allow" if s[0] == "+" else "deny", s[1:]) for s in specs]


def _ctx(ws: Path, spec_name: str, args: Mapping[str, Any], rules: list[PermissionRule]) -> ToolContext:
    spec = {s.name: s for s in builtin_tools()}[spec_name]
    return ToolContext(session_id="s", mode="headless", model="m", turn=1, call_id="c", workspace=ws,
                       idempotency_key="k", deadline_s=30, path_filter=path_filter(spec, args, rules, ws))


# -- a rule's pattern and the path arguments ---------------------------------------------------------------


@pytest.mark.parametrize("path", ["secrets/api.key", "./docs/../secrets/api.key", "docs/key-link"])
def test_a_deny_pattern_meets_greps_path_in_its_resolved_forms(ws: Path, path: str) -> None:
    """grep's primary argument is its regex; a `grep(secrets/*)` deny rule still meets its `path`, however spelt
    (a symlink into secrets/ included)."""
    checked = _processor(ws).check("grep", {"pattern": ".", "path": path}, _rules("-grep(secrets/*)"), "headless")
    assert isinstance(checked.verdict, Deny) and checked.verdict.check == "policy", checked.verdict


def test_a_deny_pattern_still_meets_greps_regex(ws: Path) -> None:
    """The primary argument is still matched: a pattern over grep's regex keeps working."""
    checked = _processor(ws).check("grep", {"pattern": "password"}, _rules("-grep(pass*)"), "headless")
    assert isinstance(checked.verdict, Deny)


def test_a_deny_pattern_meets_any_path_argument_and_an_allow_pattern_must_meet_all(ws: Path) -> None:
    """On a tool with two path arguments a deny rule applies when either path matches; an allow rule only when
    both do (an allow pattern cannot be stretched to a second path it does not cover)."""
    proc = _processor(ws)
    into_secrets = {"src": "docs/guide.md", "dst": "secrets/copy.md"}
    assert isinstance(proc.check("copy", into_secrets, _rules("+copy", "-copy(secrets/*)"), "headless").verdict,
                      Deny)
    allowed = proc.check("copy", {"src": "docs/guide.md", "dst": "docs/copy.md"}, _rules("+copy(docs/*)"),
                         "headless")
    assert isinstance(allowed.verdict, Pass) and "copy(docs/*)" in (allowed.verdict.rule or "")
    stretched = proc.check("copy", into_secrets, _rules("+copy(docs/*)"), "headless")
    assert not isinstance(stretched.verdict, Pass), stretched.verdict


def test_per_argument_globs_keep_working(ws: Path) -> None:
    """`args = { path = ... }` still names one argument, and a rule's other globs must all match."""
    rule = PermissionRule(action="deny", tool="grep", args={"path": "secrets*", "pattern": "tok*"})
    proc = _processor(ws)
    assert isinstance(proc.check("grep", {"pattern": "token", "path": "secrets"}, [rule], "headless").verdict, Deny)
    assert isinstance(proc.check("grep", {"pattern": "hello", "path": "secrets"}, [rule], "headless").verdict, Pass)
    assert isinstance(proc.check("grep", {"pattern": "token", "path": "docs"}, [rule], "headless").verdict, Pass)


# -- the filter the policy step builds ---------------------------------------------------------------------


def test_the_filter_holds_deny_and_ask_globs_of_rules_on_this_tool(ws: Path) -> None:
    """Deny and ask rules on the calling tool give their path globs; allow rules and rules on other tools give
    none; a rule whose other argument globs do not match this call gives none either."""
    spec = {s.name: s for s in builtin_tools()}["grep"]
    rules = [*_rules("-grep(secrets/*)", "+grep(docs/*)", "-read_file(private/*)", "-*(keys/*)"),
             PermissionRule(action="ask", tool="gr*", args={"path": "vault/*"}),
             PermissionRule(action="deny", tool="grep", args={"path": "other/*", "pattern": "never*"})]
    got = path_filter(spec, {"pattern": "x"}, rules, ws)
    assert got is not None
    assert set(got.globs) == {"secrets/*", "keys/*", "vault/*"}
    assert path_filter(spec, {"pattern": "x"}, _rules("+grep(docs/*)", "-read_file(secrets/*)"), ws) is None


def test_a_shell_command_gets_no_filter(ws: Path) -> None:
    """bash's pattern is a command, not a path, and bash walks nothing a filter could reach."""
    bash = {s.name: s for s in builtin_tools()}["bash"]
    assert path_filter(bash, {"command": "ls"}, _rules("-bash(rm*)"), ws) is None


def test_the_filter_skips_a_link_that_leads_into_a_denied_path(ws: Path) -> None:
    """A symlink is judged by where it leads as well as by its own name."""
    keep_out = PathFilter(root=ws, globs=("secrets/*",))
    assert keep_out.skips(ws / "docs" / "key-link")
    assert keep_out.skips(ws / "secrets" / "api.key")
    assert not keep_out.skips(ws / "docs" / "guide.md")
    assert not keep_out.skips(ws / "secrets")


# -- the walking tools -------------------------------------------------------------------------------------


async def test_grep_never_opens_a_filtered_file_even_through_a_link(ws: Path) -> None:
    """grep over the workspace with `grep(secrets/*)` denied: no secret, the link into secrets/ skipped too."""
    ctx = _ctx(ws, "grep", {"pattern": "."}, _rules("-grep(secrets/*)"))
    out = await fs.grep({"pattern": "."}, ctx)
    assert "SECRET" not in out.text
    assert "docs/guide.md:1:hello docs" in out.text
    assert out.text.endswith("[3 paths skipped by policy rules: deny rule 'grep(secrets/*)' (flag)]"), out.text


async def test_walks_never_list_a_filtered_directory(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """glob, list_dir and grep skip a filtered directory without listing it (the real os.scandir, observed)."""
    scanned: list[str] = []
    real_scandir = os.scandir

    def observed(path: Any) -> Any:
        scanned.append(os.path.realpath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", observed)
    rules = _rules("-*(secrets/*)")
    await fs.glob_files({"pattern": "**/*"}, _ctx(ws, "glob", {"pattern": "**/*"}, rules))
    await fs.grep({"pattern": "."}, _ctx(ws, "grep", {"pattern": "."}, rules))
    listing = await fs.list_dir({"path": "secrets"}, _ctx(ws, "list_dir", {"path": "secrets"}, rules))
    assert str(ws / "secrets" / "nested") not in scanned
    assert listing.text == "(nothing to show)\n[2 paths skipped by policy rules: deny rule '*(secrets/*)' (flag)]"


async def test_without_rules_the_walks_are_unchanged(ws: Path) -> None:
    """No filter: every file is searched and listed, with no note."""
    ctx = _ctx(ws, "glob", {"pattern": "**/*.key"}, [])
    assert (await fs.glob_files({"pattern": "**/*.key"}, ctx)).text == "secrets/api.key"
