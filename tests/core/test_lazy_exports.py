"""core/lazy_exports.py: a package's public names imported when first used. A public name that is also the name of
one of the package's modules would be the module once that module is imported (Python binds a submodule on its
package): no package may have one."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

LAZY_PACKAGES = ("config", "memory", "observability", "tool_executor")


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_no_public_name_is_also_a_module_of_its_package(name: str) -> None:
    package = importlib.import_module(name)
    modules = {info.name for info in pkgutil.iter_modules(package.__path__)}
    exports = package._EXPORTS
    assert not set(exports) & modules
    assert set(exports) == set(package.__all__)


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_every_public_name_is_what_its_module_defines(name: str) -> None:
    package = importlib.import_module(name)
    for public, (module, attribute) in package._EXPORTS.items():
        assert getattr(package, public) is getattr(importlib.import_module(module), attribute), public
    with pytest.raises(AttributeError, match="no attribute"):
        package.no_such_name  # noqa: B018
