"""The one place where the session host's words become the wire's: what a hosted session sends an attachment
becomes a push, a status row becomes the `status` reply's row, and a refusal becomes an error code. The daemon
core (agent/daemon) and the IPC layer (agent/ipc) know nothing of each other; this module knows both."""

from __future__ import annotations

from agent import daemon, ipc
from core.errors import OrphanRunning, SessionActive, SessionNotFound, StrataError
from core.masking import Masker

_WARNINGS = frozenset({"dropped", "parked", "released", "shutting_down"})
"""Notice kinds sent as `warning`; the others (`detached`, `closed`, `driver_left`, `driver_attached`) are `info`: a
client leaving or coming, or a session leaving the daemon, is how things go, not something gone wrong."""


def push_of(message: daemon.Outbound) -> ipc.Push:
    match message:
        case daemon.SessionEvent():
            return ipc.EventPush.of(message.item)
        case daemon.ApprovalAsk():
            return ipc.ApprovalRequest(
                session_id=message.session_id, call_id=message.call_id, tool=message.tool, input=message.input,
                args_sha256=message.args_sha256, asked_by=message.asked_by, reasons=message.reasons,
                safety=message.safety, effect=message.effect, plan_digest=message.plan_digest,  # type: ignore[arg-type]
                pii=message.pii)
        case daemon.TurnResult():
            return ipc.ResultPush(
                session_id=message.session_id, status=message.status, exit_code=message.exit_code,
                reason=message.reason, unknown_receipts=message.unknown_receipts,
                parked=tuple(ipc.ParkedView(call_id=p.call_id, tool=p.tool, input=p.input, reasons=p.reasons,
                                            asked_by=p.asked_by) for p in message.parked))
        case daemon.TextDelta():
            return ipc.TextDelta(session_id=message.session_id, text=message.text, attempt=message.attempt,
                                 offset=message.offset)
        case daemon.Notice():
            return ipc.Notice(session_id=message.session_id, kind=message.kind, text=message.text,
                              level="warning" if message.kind in _WARNINGS else "info")
    raise TypeError(f"no push for {type(message).__name__}")  # pragma: no cover - the union is closed


def info_of(info: daemon.SessionInfo) -> ipc.SessionInfo:
    return ipc.SessionInfo(
        session_id=info.session_id, status=info.status, phase=info.phase, workspace=info.workspace,
        model=info.model, turn_running=info.turn_running, drivers=info.drivers, watchers=info.watchers,
        waiting=tuple(ipc.WaitingCall(call_id=w.call_id, tool=w.tool, how=w.how, session_id=w.session_id)
                      for w in info.waiting))


def refusal_of(err: StrataError, masker: Masker) -> ipc.Refused:
    """A session-side error as the one-line refusal a client gets (its hint after a semicolon), masked like every
    line the daemon writes that can quote what a client or a model chose."""
    code: ipc.ErrorCode
    if isinstance(err, daemon.HostRefused):
        code = err.code
    elif isinstance(err, SessionNotFound):
        code = "unknown_session"
    elif isinstance(err, SessionActive | OrphanRunning):
        code = "session_busy"
    else:
        code = "refused"
    text = err.message + (f"; {err.hint}" if err.hint else "")
    return ipc.Refused(code=code, message=masker.mask(" ".join(text.split())))
