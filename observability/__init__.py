"""Observation: structured logging (masked, to stderr and a rotating file under the Strata home) and the
hash-chained session timeline."""

from observability.logging import attach_home, configure_logging, reset_logging

__all__ = ["attach_home", "configure_logging", "reset_logging"]
