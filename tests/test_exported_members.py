"""Each package's public surface is exactly what its `__all__` names, and every name there exists: both ways, so
a name added to a package without being exported (or exported without existing) fails here."""

import __future__

import importlib
import pathlib
import types

import pytest

PACKAGES = ["core.tools", "core.model", "core.knowledge", "core.hooks", "core.masking", "config", "memory",
            "memory.knowledge", "memory.postgres", "observability", "observability.export", "tool_executor",
            "tool_executor.shell", "tool_executor.builtin", "tool_executor.mcp", "agent.ipc", "agent.daemon",
            "agent.serve", "agent.testing", "agent.mcp", "agent.mcp_serve", "agent.channels", "memory.channel_book"]

_PROJECT = ("core", "config", "memory", "observability", "tool_executor", "agent")


def _public(module: types.ModuleType) -> set[str]:
    """The names a package's own code binds without a leading underscore: what it defines or takes from the
    project. Submodules, `from __future__` features, `TYPE_CHECKING` and helpers taken from the standard library
    or other distributions (typing's `Literal`, functools' `lru_cache`) are not its surface."""
    names = set()
    for name, value in vars(module).items():
        if name.startswith("_") or name == "TYPE_CHECKING" or isinstance(value, types.ModuleType | __future__._Feature):
            continue
        origin = getattr(value, "__module__", None)
        if isinstance(origin, str) and origin.split(".")[0] not in _PROJECT:
            continue
        names.add(name)
    return names


@pytest.mark.parametrize("name", PACKAGES)
def test_all_names_exist(name: str) -> None:
    """Every name in __all__ is importable from the package."""
    module = importlib.import_module(name)
    assert module.__all__, f"{name} exports nothing"
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert missing == []
    assert sorted(module.__all__) == sorted(set(module.__all__))


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_name_is_exported(name: str) -> None:
    """Every public name the package binds is in __all__ (a helper it only uses is imported under a private name
    or for type checking only)."""
    module = importlib.import_module(name)
    assert sorted(_public(module) - set(module.__all__)) == []


def _packages() -> list[str]:
    top = pathlib.Path(__file__).resolve().parent.parent
    found = []
    for root in _PROJECT:
        for init in sorted((top / root).rglob("__init__.py")):
            found.append(".".join(init.parent.relative_to(top).parts))
    return found


@pytest.mark.parametrize("name", sorted(set(_packages()) - set(PACKAGES)))
def test_a_package_without_an_export_list_is_only_a_folder_of_modules(name: str) -> None:
    """A package not listed above exports nothing: its `__init__` binds no public name, so its modules are
    imported by their own paths (`agent.cli.main`, `core.events`) and nothing is reachable by two names."""
    module = importlib.import_module(name)
    assert not hasattr(module, "__all__")
    assert sorted(_public(module)) == []
