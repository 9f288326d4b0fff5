"""Each package's public surface is exactly what its `__all__` names, and every name there exists."""

import importlib

import pytest

PACKAGES = ["core.tools", "core.model", "core.knowledge", "config", "memory", "memory.knowledge", "observability",
            "tool_executor", "tool_executor.shell", "agent.ipc", "agent.daemon", "agent.serve"]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_names_exist(name: str) -> None:
    """Every name in __all__ is importable from the package."""
    module = importlib.import_module(name)
    assert module.__all__, f"{name} exports nothing"
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert missing == []
    assert sorted(module.__all__) == sorted(set(module.__all__))
