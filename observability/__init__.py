"""Observation: structured logging now; the hash-chained timeline and exporters land with the inspection
issue."""

from observability.logging import configure_logging

__all__ = ["configure_logging"]
