"""Which tools a mode's plan leaves out before anything is checked. Mode `mcp` (a one-shot `run_agent` for an
external MCP host, agent/mcp_serve) has a default deny list: `bash`, delegation and every tool of safety level
`execute` or `admin` are not in its plan at all (the model is never offered them), except the tools the operator
names (`[mcp.serve] allow_tools`). Other modes keep every tool: their policy decides call by call."""

from __future__ import annotations

from collections.abc import Iterable

from core.events import Mode
from core.tools.spec import ToolSpec

DENIED_NAMES = frozenset({"bash", "delegate", "spawn_agent", "computer"})
"""Shell, delegation and computer control, by name (a tool of these names never runs in mode `mcp`)."""
DENIED_SAFETY = frozenset({"execute", "admin"})


def removed_in(mode: Mode, spec: ToolSpec, allowed: Iterable[str] = ()) -> bool:
    """Whether `mode`'s plan leaves `spec` out (`allowed`: the names the operator added back)."""
    if mode != "mcp" or spec.name in set(allowed):
        return False
    return spec.name in DENIED_NAMES or spec.safety in DENIED_SAFETY


def for_mode(tools: Iterable[ToolSpec], mode: Mode, allowed: Iterable[str] = ()) -> list[ToolSpec]:
    kept = tuple(allowed)
    return [spec for spec in tools if not removed_in(mode, spec, kept)]
