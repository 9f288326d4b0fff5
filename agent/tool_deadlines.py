"""`[tools.NAME] timeout_s`: a tool's deadline from config. A name no tool has is an error naming its file and key
(not a setting silently ignored), found alike by `strata run` (which refuses to start), `strata config show`
(which refuses to show a config that would not run) and `strata doctor` (which lists it as a problem)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from config import LoadedConfig
from core.errors import ConfigError
from core.tools import ToolSpec


def unknown_tool_deadlines(config: LoadedConfig, tools: Sequence[ToolSpec] | None = None) -> list[ConfigError]:
    """One error per `[tools.NAME]` table whose NAME is none of `tools` (the built-in tools by default)."""
    if not config.tool_timeouts:
        return []
    if tools is None:
        from tool_executor import builtin_tools  # only when a file sets a deadline: most configs never need it

        tools = builtin_tools()
    names = {t.name for t in tools}
    return [ConfigError(f"no tool is named {d.tool!r} (tools: {', '.join(sorted(names))})", file=d.source,
                        key=f"tools.{d.tool}")
            for d in config.tool_timeouts if d.tool not in names]


def with_deadlines(tools: list[ToolSpec], config: LoadedConfig) -> list[ToolSpec]:
    """The tools with the deadlines config gives them; raises the first unknown name's error."""
    unknown = unknown_tool_deadlines(config, tools)
    if unknown:
        raise unknown[0]
    given = {d.tool: d.timeout_s for d in config.tool_timeouts}
    return [dataclasses.replace(t, timeout_s=given[t.name]) if t.name in given else t for t in tools]
