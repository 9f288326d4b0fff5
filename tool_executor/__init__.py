"""The tool-call path: checks, hooks, approval, receipts, locks, dispatch, one result shape, and the call record
each call's path fills (the one thing its recorders read)."""

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
