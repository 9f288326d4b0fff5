"""A configured hook as the runtime receives it: which event, which tools, the shell command, its effective timeout,
the variables it may see, and the file and entry it came from (so a verdict can name the hook that gave it)."""

import fnmatch
from collections.abc import Callable
from typing import get_args

from pydantic import BaseModel, ConfigDict

from core.hooks import Hook, HookEvent

HOOK_EVENTS: tuple[HookEvent, ...] = get_args(HookEvent)


class HookSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    event: HookEvent
    matcher: str
    """Glob over the tool name (`*` for every tool; `stop` hooks have no tool and always match)."""
    command: str
    """A shell command line."""
    timeout_s: float
    """The entry's own `timeout_s`, or the effective `hook_timeout_s` setting."""
    source: str
    """The config file that declared it, or `built-in defaults`."""
    index: int
    """Position among its file's entries for this event: the entry is `hooks.<event>[index]` in `source`."""
    env: tuple[str, ...] = ()
    """Variables passed to the command although `bash` does not get them."""
    project: bool = False
    """Declared by the workspace's (trusted) project file, so what it runs lives where the model writes."""

    @property
    def name(self) -> str:
        return f"hooks.{self.event}[{self.index}]"

    def matches(self, tool: str | None) -> bool:
        return tool is None or fnmatch.fnmatchcase(tool, self.matcher)

    def identity(self) -> dict[str, object]:
        """What the hook does (not where it was read): the digest of a session's project hooks covers this."""
        return {"event": self.event, "index": self.index, "matcher": self.matcher, "command": self.command,
                "timeout_s": self.timeout_s, "env": list(self.env)}

    def to_hook(self, precheck: Callable[[], str | None] | None = None) -> Hook:
        """The runtime's hook (`core.hooks.Hook`), run by the command runner in tool_executor/hooks; `precheck`
        runs before each run of the command (a trusted project's file check)."""
        return Hook(name=self.name, event=self.event, matcher=self.matcher, command=self.command,
                    timeout_s=self.timeout_s, source=self.source, env=self.env, precheck=precheck)
