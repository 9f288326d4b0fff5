"""Session permission rules given with `--allow` / `--deny` (e.g. `bash`, `bash(git status*)`).

A rule names a tool and optionally a glob over the tool's primary argument (the command for `bash`, the path
for file tools). Deny beats allow. The pipeline issue extends this with config rules and `ask`."""

from __future__ import annotations

import fnmatch
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

from core.errors import UsageError

RuleAction = Literal["allow", "deny"]

_RULE = re.compile(r"^(?P<tool>[A-Za-z0-9_.:*-]+)(?:\((?P<pattern>.*)\))?$", re.DOTALL)


class PermissionRule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    action: RuleAction
    tool: str
    pattern: str | None = None
    source: str = "flag"

    def text(self) -> str:
        return self.tool + (f"({self.pattern})" if self.pattern is not None else "")

    def matches(self, tool: str, primary: str | None) -> bool:
        if not fnmatch.fnmatchcase(tool, self.tool):
            return False
        if self.pattern is None:
            return True
        return primary is not None and fnmatch.fnmatchcase(primary, self.pattern)


def parse_rule(action: RuleAction, text: str, source: str = "flag") -> PermissionRule:
    m = _RULE.match(text.strip())
    if not m:
        raise UsageError(f"invalid --{action} rule {text!r}",
                         hint="write a tool name, optionally with a pattern: bash, 'bash(git status*)', write_file")
    return PermissionRule(action=action, tool=m["tool"], pattern=m["pattern"], source=source)
