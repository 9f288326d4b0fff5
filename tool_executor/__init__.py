"""The tool-call path: checks, hooks, approval, receipts, locks, dispatch, one result shape, and the call record
each call's path fills (the one thing its recorders read)."""

from typing import TYPE_CHECKING

from core.lazy_exports import lazy_exports as _lazy_exports

if TYPE_CHECKING:  # imported when first used (core/lazy_exports.py)
    from core.vocabulary import OnAsk
    from tool_executor._call_record import CallRecord, ReceiptChange, Recorder
    from tool_executor._receipts import NEXT as RECEIPT_TRANSITIONS
    from tool_executor._receipts import reconciliation
    from tool_executor._recorder import TimelineRecorder, call_row, receipt_row
    from tool_executor._types import BatchRun, CallEnv, Checked, Decision, Step, WaitingCall
    from tool_executor.approval import ApprovalAnswer, ApprovalRequest, Approver, recorded_decision
    from tool_executor.builtin import builtin_tools
    from tool_executor.executor import ToolCallProcessor
    from tool_executor.locks import LockTimeout, ResourceLocks
    from tool_executor.middleware import DEFAULT_MIDDLEWARE, Middleware, Rewrite
    from tool_executor.verdicts import Ask, Deny, Parked, Pass, Verdict

_EXPORTS: dict[str, tuple[str, str]] = {
    "OnAsk": ("core.vocabulary", "OnAsk"),
    "CallRecord": ("tool_executor._call_record", "CallRecord"),
    "ReceiptChange": ("tool_executor._call_record", "ReceiptChange"),
    "Recorder": ("tool_executor._call_record", "Recorder"),
    "RECEIPT_TRANSITIONS": ("tool_executor._receipts", "NEXT"),
    "reconciliation": ("tool_executor._receipts", "reconciliation"),
    "TimelineRecorder": ("tool_executor._recorder", "TimelineRecorder"),
    "call_row": ("tool_executor._recorder", "call_row"),
    "receipt_row": ("tool_executor._recorder", "receipt_row"),
    "BatchRun": ("tool_executor._types", "BatchRun"),
    "CallEnv": ("tool_executor._types", "CallEnv"),
    "Checked": ("tool_executor._types", "Checked"),
    "Decision": ("tool_executor._types", "Decision"),
    "Step": ("tool_executor._types", "Step"),
    "WaitingCall": ("tool_executor._types", "WaitingCall"),
    "ApprovalAnswer": ("tool_executor.approval", "ApprovalAnswer"),
    "ApprovalRequest": ("tool_executor.approval", "ApprovalRequest"),
    "Approver": ("tool_executor.approval", "Approver"),
    "recorded_decision": ("tool_executor.approval", "recorded_decision"),
    "builtin_tools": ("tool_executor.builtin", "builtin_tools"),
    "ToolCallProcessor": ("tool_executor.executor", "ToolCallProcessor"),
    "LockTimeout": ("tool_executor.locks", "LockTimeout"),
    "ResourceLocks": ("tool_executor.locks", "ResourceLocks"),
    "DEFAULT_MIDDLEWARE": ("tool_executor.middleware", "DEFAULT_MIDDLEWARE"),
    "Middleware": ("tool_executor.middleware", "Middleware"),
    "Rewrite": ("tool_executor.middleware", "Rewrite"),
    "Ask": ("tool_executor.verdicts", "Ask"),
    "Deny": ("tool_executor.verdicts", "Deny"),
    "Parked": ("tool_executor.verdicts", "Parked"),
    "Pass": ("tool_executor.verdicts", "Pass"),
    "Verdict": ("tool_executor.verdicts", "Verdict"),
}
"""Each public name: the module that defines it, and its name there."""

__all__ = [
    "DEFAULT_MIDDLEWARE",
    "RECEIPT_TRANSITIONS",
    "ApprovalAnswer",
    "ApprovalRequest",
    "Approver",
    "Ask",
    "BatchRun",
    "CallEnv",
    "CallRecord",
    "Checked",
    "Decision",
    "Deny",
    "LockTimeout",
    "Middleware",
    "OnAsk",
    "Parked",
    "Pass",
    "ReceiptChange",
    "Recorder",
    "ResourceLocks",
    "Rewrite",
    "Step",
    "TimelineRecorder",
    "ToolCallProcessor",
    "Verdict",
    "WaitingCall",
    "builtin_tools",
    "call_row",
    "receipt_row",
    "reconciliation",
    "recorded_decision",
]


__getattr__ = _lazy_exports(__name__, _EXPORTS, globals())
