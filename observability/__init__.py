"""Observation: structured logging (masked, to stderr and a rotating file under the Strata home) and the
hash-chained session timeline."""

from typing import TYPE_CHECKING

from core.lazy_exports import lazy_exports as _lazy_exports

if TYPE_CHECKING:  # imported when first used (core/lazy_exports.py)
    from observability.logging import attach_home, configure_logging, reset_logging

_EXPORTS: dict[str, tuple[str, str]] = {
    "attach_home": ("observability.logging", "attach_home"),
    "configure_logging": ("observability.logging", "configure_logging"),
    "reset_logging": ("observability.logging", "reset_logging"),
}
"""Each public name: the module that defines it, and its name there."""

__all__ = ["attach_home", "configure_logging", "reset_logging"]


__getattr__ = _lazy_exports(__name__, _EXPORTS, globals())
