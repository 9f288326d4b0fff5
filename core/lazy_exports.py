"""A package's public names imported when first used (PEP 562), so that importing one module of a package does not
import every module its `__init__` re-exports: a command that only reads starts without most of them."""

from __future__ import annotations

import importlib
from collections.abc import Callable, MutableMapping


def lazy_exports(package: str, exports: dict[str, tuple[str, str]],
                 namespace: MutableMapping[str, object]) -> Callable[[str], object]:
    """The package's `__getattr__`: `exports` maps each public name to (module, name there); the value is cached in
    the package's `namespace` on first use."""

    def __getattr__(name: str) -> object:
        found = exports.get(name)
        if found is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(found[0]), found[1])
        namespace[name] = value
        return value

    return __getattr__
