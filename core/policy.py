"""Permission rules: from flags (`--allow RULE`, `--deny RULE`, e.g. `bash`, `bash(git status*)`) and from config
(`[[policy.rules]]` with a tool glob, optional glob patterns per argument, and an action).

A rule names a tool (a glob) and optionally patterns: `pattern` is matched against the tool's primary argument
(the command for `bash`, the path for file tools) and every path argument (a deny or ask rule applies when any
matches, an allow rule when all do); `args` maps argument names to globs, each of which must match. Deny beats ask
beats allow (tool_executor/checks/policy.py)."""


import fnmatch
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from core.errors import UsageError
from core.utf8 import unpaired_surrogates

RuleAction = Literal["allow", "ask", "deny"]
RULE_ACTIONS: tuple[RuleAction, ...] = ("allow", "ask", "deny")

_RULE = re.compile(r"^(?P<tool>[A-Za-z0-9_.:*?\[\]-]+)(?:\((?P<pattern>.*)\))?$", re.DOTALL)


class PermissionRule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    action: RuleAction
    tool: str
    pattern: str | None = None
    """Glob over the tool's primary argument and its path arguments (flag form `tool(pattern)`)."""
    args: dict[str, str] = Field(default_factory=dict)
    """Globs per named argument (config form `args = { path = "docs/*" }`)."""
    source: str = "flag"
    """Where the rule came from: `flag`, `resume`, a config file path, `grant`."""

    def text(self) -> str:
        out = self.tool + (f"({self.pattern})" if self.pattern is not None else "")
        if self.args:
            out += "{" + ", ".join(f"{k}={v!r}" for k, v in sorted(self.args.items())) + "}"
        return out

    def matches_tool(self, tool: str) -> bool:
        return fnmatch.fnmatchcase(tool, self.tool)


def unclosed_bracket(glob: str) -> bool:
    """True when a `[` opens a character class that never closes (fnmatch would silently match it literally)."""
    i, n = 0, len(glob)
    while i < n:
        if glob[i] == "[":
            j = i + 1
            if j < n and glob[j] == "!":
                j += 1
            if j < n and glob[j] == "]":
                j += 1
            while j < n and glob[j] != "]":
                j += 1
            if j >= n:
                return True
            i = j
        i += 1
    return False


def parse_rule(action: RuleAction, text: str, source: str = "flag") -> PermissionRule:
    if unpaired_surrogates(text):  # argv bytes that are not UTF-8: the session could not record the rule
        shown = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise UsageError(f"invalid --{action} rule '{shown}': it is not UTF-8 text",
                         hint="a rule is recorded in the session as text; write it in UTF-8 (a `*` matches any name)")
    m = _RULE.match(text.strip())
    if not m:
        raise UsageError(f"invalid --{action} rule {text!r}",
                         hint="write a tool name, optionally with a pattern: bash, 'bash(git status*)', write_file")
    if unclosed_bracket(m["tool"]) or (m["pattern"] is not None and unclosed_bracket(m["pattern"])):
        raise UsageError(f"invalid --{action} rule {text!r}: a '[' is never closed by ']'",  # as in a config file
                         hint="close the class ('[abc]'), or write '[[]' for a literal '['")
    return PermissionRule(action=action, tool=m["tool"], pattern=m["pattern"], source=source)
