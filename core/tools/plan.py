"""BoundToolPlan: the immutable set of tools a session may call, projected per session. Its digest is recorded
in `SessionStarted` and re-checked on resume. It covers the mode, every tool's identity and, when the session
has knowledge tools, the knowledge manifest they read (so an approval bound to a plan does not outlive a changed
corpus)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType

from core.events import Mode
from core.hashing import sha256_json
from core.tools.spec import ToolSpec


class BoundToolPlan(Mapping[str, ToolSpec]):
    def __init__(self, tools: Iterable[ToolSpec], mode: Mode, *, knowledge_digest: str | None = None) -> None:
        specs: dict[str, ToolSpec] = {}
        for spec in tools:
            if spec.name in specs:
                raise ValueError(f"tool {spec.name!r} registered twice")
            specs[spec.name] = spec
        self._tools = MappingProxyType(specs)
        self.mode = mode
        self.knowledge_digest = knowledge_digest
        body: dict[str, object] = {"mode": mode, "tools": [specs[n].identity() for n in sorted(specs)]}
        if knowledge_digest is not None:  # absent otherwise: a plan without knowledge keeps the digest it had
            body["knowledge"] = knowledge_digest
        self.digest = "plan_" + sha256_json(body)[:32]
        self._definitions = tuple(
            MappingProxyType({"name": s.name, "description": s.description, "input_schema": s.input_schema})
            for s in (specs[n] for n in sorted(specs)))

    def __getitem__(self, name: str) -> ToolSpec:
        return self._tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def declared_digests(self) -> dict[str, str]:
        """Name -> digest of the declaration of each tool that carries one (tools from MCP servers): what a resume
        compares to name the tools that changed."""
        return {name: sha256_json(spec.identity())[:32] for name, spec in sorted(self._tools.items())
                if spec.declared is not None}

    def tool_definitions(self) -> tuple[Mapping[str, object], ...]:
        """Tool definitions as the model sees them (name, description, input schema), in a stable order."""
        return self._definitions
