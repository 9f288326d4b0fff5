"""Tool contracts: specs, the per-call context, handler outputs and the bound plan."""

from core.tools.context import ToolContext
from core.tools.plan import BoundToolPlan
from core.tools.spec import (
    EffectClass,
    PiiClass,
    SafetyLevel,
    ToolError,
    ToolOutput,
    ToolSpec,
    ToolTimeout,
)

__all__ = [
    "BoundToolPlan",
    "EffectClass",
    "PiiClass",
    "SafetyLevel",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "ToolSpec",
    "ToolTimeout",
]
