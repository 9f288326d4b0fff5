"""What the model is told when the declared tools of its plan (tools from MCP servers) changed between runs."""

from __future__ import annotations

from collections.abc import Mapping

from core.events import ToolsChanged


def tools_change(told: Mapping[str, str], now: Mapping[str, str]) -> ToolsChanged:
    """The event that tells the model the declared tools went from `told` to `now` (name -> declaration digest)."""
    changed = tuple(sorted(n for n in told.keys() & now.keys() if told[n] != now[n]))
    added = tuple(sorted(now.keys() - told.keys()))
    removed = tuple(sorted(told.keys() - now.keys()))
    parts = [f"{label}: {', '.join(names)}" for label, names in
             (("changed (schema or policy)", changed), ("added", added), ("removed", removed)) if names]
    notice = ("[runtime] Tools from MCP servers changed since you last used them; " + "; ".join(parts) + ". Use the "
              "tool definitions as they are now: a call made under the old definition is checked, and approved, "
              "again.")
    return ToolsChanged(changed=changed, added=added, removed=removed, tools=dict(now), notice=notice)
