"""BoundToolPlan: the immutable set of tools a session may call, projected per session. Its digest is recorded
in `SessionStarted` and re-checked on resume."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType

from core.events import Mode
from core.hashing import sha256_json
from core.tools.spec import ToolSpec


class BoundToolPlan(Mapping[str, ToolSpec]):
    def __init__(self, tools: Iterable[ToolSpec], mode: Mode) -> None:
        specs: dict[str, ToolSpec] = {}
        for spec in tools:
            if spec.name in specs:
                raise ValueError(f"tool {spec.name!r} registered twice")
            specs[spec.name] = spec
        self._tools = MappingProxyType(specs)
        self.mode = mode
        self.digest = "plan_" + sha256_json(
            {"mode": mode, "tools": [specs[n].identity() for n in sorted(specs)]})[:32]
        self._definitions = tuple(
            MappingProxyType({"name": s.name, "description": s.description, "input_schema": s.input_schema})
            for s in (specs[n] for n in sorted(specs)))

    def __getitem__(self, name: str) -> ToolSpec:
        return self._tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def tool_definitions(self) -> tuple[Mapping[str, object], ...]:
        """Tool definitions as the model sees them (name, description, input schema), in a stable order."""
        return self._definitions
