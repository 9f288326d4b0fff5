"""Observation: structured logging (masked, to stderr and a rotating file under the Strata home) and the
hash-chained session timeline."""

from typing import TYPE_CHECKING

from core.lazy_exports import lazy_exports as _lazy_exports

if TYPE_CHECKING:  # imported when first used (core/lazy_exports.py)
    from observability.deferred_logging import attach_home, set_up_at_first_record
    from observability.logging import configure_logging, reset_logging

_EXPORTS: dict[str, tuple[str, str]] = {
    "attach_home": ("observability.deferred_logging", "attach_home"),
    "configure_logging": ("observability.logging", "configure_logging"),
    "reset_logging": ("observability.logging", "reset_logging"),
    "set_up_at_first_record": ("observability.deferred_logging", "set_up_at_first_record"),
}
"""Each public name: the module that defines it, and its name there."""

__all__ = ["attach_home", "configure_logging", "reset_logging", "set_up_at_first_record"]


__getattr__ = _lazy_exports(__name__, _EXPORTS, globals())
