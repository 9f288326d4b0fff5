"""A plain logging record's fields. A module that logs with the standard library (so that a command importing it
need not import structlog: memory/restore.py) gives its fields as `extra=log_fields(name=value, ...)`; the logging
setup (observability/logging.py) makes them the event's own fields, as a structlog call's keywords are, before
anything masks, shows or keeps the event."""

from __future__ import annotations

from typing import Any

FIELDS = "strata_fields"
"""The record's attribute that holds them."""


def log_fields(**values: Any) -> dict[str, dict[str, Any]]:
    """The `extra` of a logging call whose event carries `values` as fields."""
    return {FIELDS: values}
