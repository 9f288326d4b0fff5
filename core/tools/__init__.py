"""Tool contracts: specs, the per-call context, handler outputs and the bound plan."""

from core.tools.blocking import Stop, Stopped, run_stoppable
from core.tools.context import ToolContext
from core.tools.path_filter import PathFilter, skipped_note
from core.tools.plan import BoundToolPlan
from core.tools.spec import (
    PII_ORDER,
    SAFETY_ORDER,
    EffectClass,
    PiiClass,
    Probe,
    ProbeResult,
    ProbeVerdict,
    SafetyLevel,
    ToolError,
    ToolOutput,
    ToolSpec,
    ToolTimeout,
    ToolWaits,
)

__all__ = [
    "PII_ORDER",
    "SAFETY_ORDER",
    "BoundToolPlan",
    "EffectClass",
    "PathFilter",
    "PiiClass",
    "Probe",
    "ProbeResult",
    "ProbeVerdict",
    "SafetyLevel",
    "Stop",
    "Stopped",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "ToolSpec",
    "ToolTimeout",
    "ToolWaits",
    "run_stoppable",
    "skipped_note",
]
