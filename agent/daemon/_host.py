"""SessionHost: many sessions driven at once in one process, the transport-independent core of `strata serve`.

One host per process, opened on one Runtime. Each session is a task in the host's task group holding the
session's lease exactly as a `strata run` process does while it runs a turn or a client drives it
(agent/daemon/_hosted.py), so a session the host drives cannot be driven by another process, and the host cannot
take one another process drives ("session ... is active"). A session only watched (or not attached to) between
turns holds no lease: `strata resume ID` works elsewhere meanwhile.
Clients reach a session through attachments: one drives (prompts, approvals, interrupts), any number watch, and
every attachment gets the session's committed events in commit order.

`drain(grace_s)` stops the host as SIGTERM should stop a daemon: no new turn starts, a call waiting for a driver's
approval parks, a turn stops at its next model call (where nothing runs), running calls get the grace period,
then the batches still open are closed exactly as Ctrl-C closes them (agent/loop.py), every lease is released and
every attachment closed. The host never configures logging (the entry point does); each session's log lines carry its
id, bound in its own task."""

from __future__ import annotations

import dataclasses
import signal
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import anyio
import structlog
from anyio.abc import TaskGroup

from agent.daemon._attachment import DEFAULT_QUEUE, Attachment, Role
from agent.daemon._errors import HostRefused
from agent.daemon._hosted import HostedSession, HostParts
from agent.daemon._messages import SessionInfo
from agent.models import closed_on_failure, model_from_spec
from agent.reconcile import person
from agent.session import Runtime, refuse_prompt_while_child_busy
from config import LoadedConfig
from core.errors import UsageError
from core.events import StoredEvent
from core.model import ModelAdapter
from core.policy import PermissionRule
from memory.restore import restore_or_report
from observability.counted_log import CountedLog
from tool_executor import ApprovalAnswer

log = structlog.get_logger("strata.daemon")

SHUTDOWN_REASON = "the host shut down"
DEFAULT_MAX_SESSIONS = 128
"""Sessions a host drives at once (`[daemon] max_sessions`): each costs its state in memory and a lease renewal every
few seconds, so a client creating sessions in a loop must not make the host hold them without bound."""
REPLACED = "session left the host to make room for another"
"""The host's counted line (observability/counted_log.py): a client creating sessions in a loop at `max_sessions`
replaces one each time, and is one line per interval, not a line per session hosted and per session leaving."""
CLOSE_BOUND_S = 30.0
"""How long a drain waits for interrupted turns to close their batches (killing process groups, a few commits)
before it stops waiting."""


class SessionHost:
    def __init__(self, rt: Runtime, tg: TaskGroup, *, model_factory: Callable[[str], ModelAdapter],
                 max_turns: int, queue_size: int, max_sessions: int = DEFAULT_MAX_SESSIONS,
                 workspace_config: Callable[[Path], LoadedConfig] | None = None) -> None:
        self._rt = rt
        self._max_sessions = max_sessions
        self._opening = 0
        """New sessions being started (not yet in `_sessions`): they count against `max_sessions` already."""
        self._tg = tg
        # A child session the hosted sessions' delegate calls run commits through their runtime: its events reach the
        # clients attached to that child (hosted for them while it waited, without its lease), as they commit.
        self._parts = HostParts(rt=dataclasses.replace(rt, child_observer=self._child_committed),
                                model_factory=model_factory, max_turns=max_turns, queue_size=queue_size,
                                workspace_config=workspace_config)
        self._sessions: dict[str, HostedSession] = {}
        self._draining = False
        self._drained = anyio.Event()
        self._replaced = CountedLog("strata.daemon")

    @classmethod
    @asynccontextmanager
    async def open(cls, rt: Runtime, *, model_factory: Callable[[str], ModelAdapter] = model_from_spec,
                   max_turns: int = 50, queue_size: int = DEFAULT_QUEUE, max_sessions: int = DEFAULT_MAX_SESSIONS,
                   workspace_config: Callable[[Path], LoadedConfig] | None = None) -> AsyncIterator[SessionHost]:
        """Host sessions on `rt` until the block ends; leaving it drains with no grace (running turns are closed
        as Ctrl-C closes them) unless `drain` ran already. `model_factory` turns a model spec (`script:PATH`,
        `anthropic:NAME`) into an adapter, for new sessions and for those it resumes. `workspace_config`: the config
        a session in a workspace runs under (the host's with that workspace's project file), as `strata run` there
        would load it; None runs every session under `rt`'s config. `max_sessions`: the sessions hosted at once; past
        it, the one unused longest (no client attached, no turn running) leaves the host (its lease released; it is
        hosted again when a client attaches to it), or, with none unused, a new one is refused (`too_many_sessions`)."""
        async with anyio.create_task_group() as tg:
            host = cls(rt, tg, model_factory=model_factory, max_turns=max_turns, queue_size=queue_size,
                       max_sessions=max_sessions, workspace_config=workspace_config)
            tg.start_soon(host._replaced.run)
            try:
                yield host
            finally:
                with anyio.CancelScope(shield=True):
                    await host.drain(0)
                host._replaced.stop()
                tg.cancel_scope.cancel()  # whatever did not end in the drain's bounds (their cleanup is shielded)

    # ---- sessions ---------------------------------------------------------------------------------------------

    async def new_session(self, *, workspace: Path, model: str, rules: Sequence[PermissionRule] = (),
                          max_turns: int | None = None) -> str:
        """Start a session in mode `ipc` (its asks go to its driving attachment) and host it. Its id."""
        self._refuse_if_draining(None)
        adapter = await anyio.to_thread.run_sync(self._parts.model_factory, model)  # it may read a script file
        async with closed_on_failure(adapter):  # the session's once it started (closed when it is released)
            replaced = self._make_room(None)
            hosted = HostedSession(self._parts, quiet=replaced)
            self._opening += 1
            try:
                session_id: str = await self._tg.start(
                    hosted.serve, partial(hosted.start_new, workspace, adapter, rules, max_turns))
            finally:
                self._opening -= 1
        self._hosted(hosted)
        return session_id

    async def attach(self, session_id: str, role: Role = "drive", *, who: str | None = None,
                     since_seq: int | None = None) -> Attachment:
        """Attach to a session, hosting it first if it is not (SessionActive if another process drives it). A driver
        takes the session's lease (`resume_session`); a watcher does not (agent/daemon/_hosted.py). A second driver
        is refused (`not_driver`); watchers are unlimited. A driver attaching to a
        session whose calls wait for approval is asked about them again; a batch a crash left open is finished.
        `who` names the person answering through this attachment (recorded with each decision). `since_seq`: the
        attachment first replays the session's committed events from that seq, then goes on live, with none
        skipped or repeated in between (agent/daemon/_attachment.py)."""
        self._refuse_if_draining(session_id)
        who = who or person("strata attach")
        hosted = self._sessions.get(session_id)
        if hosted is not None and hosted.stopping:  # it is leaving the host (made room for another): let it go
            with anyio.move_on_after(CLOSE_BOUND_S):
                await hosted.ended.wait()
            if self._sessions.get(session_id) is hosted:
                del self._sessions[session_id]
            self._refuse_if_draining(session_id)
            hosted = self._sessions.get(session_id)  # another attach may have hosted it meanwhile
        if hosted is not None:
            attachment = hosted.add(role, who, since_seq)
            if role == "drive":
                await hosted.reread_parked()  # decided and run elsewhere meanwhile: nothing for it to finish
            asked = role == "drive" and hosted.live is None and (hosted.parked or hosted.phase == "parked")
            if asked and not hosted.parked and await hosted.waits_on_a_busy_child():
                asked = False  # its delegate call waits on a child another process drives: a prompt is refused
            if asked and hosted.live is None and not hosted.turn_running:  # its (or its child's) calls asked, or
                hosted.driver_attached(attachment)  # those decided elsewhere run; watchers hear of the driver first
                hosted.submit(None)
            elif role == "drive":
                try:
                    await hosted.drive()  # its lease, if it is hosted without it
                except BaseException:
                    hosted.remove(attachment, "closed", "the session could not be driven here")
                    raise
                hosted.driver_attached(attachment)  # only once it drives: never heard without a driver
            return attachment
        replaced = self._make_room(session_id)
        hosted = HostedSession(self._parts, session_id, quiet=replaced)
        self._sessions[session_id] = hosted
        attachment = hosted.add(role, who, since_seq)
        try:
            await self._tg.start(hosted.serve, hosted.open_existing)
        except BaseException:
            self._sessions.pop(session_id, None)
            raise
        self._hosted(hosted)
        if role == "drive":  # a watcher may have attached while the session opened
            hosted.driver_attached(attachment)
        return attachment

    def _child_committed(self, item: StoredEvent) -> None:
        """An event a child session committed, run by a hosted session's delegate call: to the clients attached to
        that child, when the host holds it for them without driving it (it cannot drive it: the delegate call holds
        its lease)."""
        hosted = self._sessions.get(item.session_id)
        if hosted is not None and hosted.live is None:
            hosted.committed_elsewhere(item)

    def _hosted(self, hosted: HostedSession) -> None:
        """A session the host now drives. One that opened while a drain began leaves again at once (the drain
        did not see it)."""
        self._sessions[hosted.id] = hosted
        self._tg.start_soon(self._forget_when_ended, hosted)
        if self._draining:
            hosted.stop()
            self._refuse_if_draining(hosted.id)

    async def _forget_when_ended(self, hosted: HostedSession) -> None:
        await hosted.ended.wait()
        if self._sessions.get(hosted.id) is hosted:
            del self._sessions[hosted.id]

    # ---- what a driver does -----------------------------------------------------------------------------------

    async def prompt(self, attachment: Attachment, text: str) -> None:
        """Start a turn on `text` and return; its events and its result reach the attachments. One turn at a
        time: a prompt while one runs is refused (`session_busy`)."""
        hosted = self._driving(attachment)
        self._refuse_if_draining(hosted.id)
        if not text.strip():
            raise UsageError("the prompt is empty", hint="say what the agent should do")
        self._refuse_if_busy(hosted)
        if hosted.live is None:  # parked or released: a prompt cannot pass calls that wait for a decision
            state = (await restore_or_report(self._rt.store, hosted.id)).state
            undecided = [c for c in state.parked if c not in state.approvals]
            if undecided:
                raise HostRefused("session_busy", f"session {hosted.id} is waiting for approval of "
                                  f"{', '.join(undecided)}; a new prompt cannot be given until they are decided",
                                  session_id=hosted.id, hint=f"attach again as the driver to be asked, or decide "
                                  f"with `strata approve|deny {hosted.id} CALL`")
            self._refuse_if_busy(hosted)
        await self._refuse_if_child_busy(hosted)
        hosted.submit(text)

    async def _refuse_if_child_busy(self, hosted: HostedSession) -> None:
        """A prompt while the session's delegate call waits on a child another process drives would finish the
        open batch first, park again on that child and never be heard: refused (`session_busy`) instead, the
        session untouched. A hosted session's turn does not pass resume_session's check (it holds its lease
        between turns), so it is made here."""
        live = hosted.live
        state = live.loop.state if live is not None else (await restore_or_report(self._rt.store, hosted.id)).state
        try:
            await refuse_prompt_while_child_busy(self._rt, state)
        except UsageError as exc:
            raise HostRefused("session_busy", exc.message, session_id=hosted.id, hint=exc.hint) from None
        self._refuse_if_busy(hosted)  # another prompt may have started a turn while this one waited

    async def approve(self, attachment: Attachment, call_id: str, *, args_sha256: str, plan_digest: str,
                      always: bool = False) -> None:
        """Approve a call this driver was asked about, for exactly the arguments and tool plan it was asked with
        (`stale_approval` otherwise). `always`: for the rest of the session, as `a` in `strata chat`."""
        hosted = self._driving(attachment)
        answer = ApprovalAnswer("always" if always else "yes", attachment.who)
        hosted.approver.answer(attachment, call_id, answer, args_sha256=args_sha256, plan_digest=plan_digest)

    async def deny(self, attachment: Attachment, call_id: str, reason: str = "", *, interrupt: bool = False) -> None:
        """Deny a call this driver was asked about. `interrupt`: and stop the running turn, in the same step (nothing
        of the session runs between the two), as Ctrl-C at an approval question in `strata chat` does: the denial
        is recorded and no model call follows it. Denied and then interrupted by a second request instead, the turn
        could go on in between (a model that answers at once ends it), and the interrupt find nothing to stop."""
        hosted = self._driving(attachment)
        hosted.approver.answer(attachment, call_id, ApprovalAnswer("no", attachment.who, reason))
        if interrupt:
            hosted.interrupt()

    def asked_through(self, attachments: Iterable[Attachment], session_id: str, call_id: str) -> Attachment | None:
        """Of `attachments` (one client's), the driver that was asked about call `call_id` of `session_id` and has
        not answered: the approval request of a child session's call names the child, and is answered through the
        attachment to its parent."""
        for attachment in attachments:
            hosted = self._sessions.get(attachment.session_id)
            if hosted is not None and hosted.driver is attachment and hosted.approver.asked(attachment, session_id,
                                                                                            call_id):
                return attachment
        return None

    async def interrupt(self, attachment: Attachment) -> bool:
        """Close the running turn exactly as Ctrl-C closes it. Whether a turn was running."""
        return self._driving(attachment).interrupt()

    async def detach(self, attachment: Attachment) -> None:
        """The attachment stops; the session keeps running, or idles. A driver's waiting calls park."""
        hosted = self._sessions.get(attachment.session_id)
        if hosted is None:
            return
        hosted.remove(attachment, "detached", "detached; the session goes on without this client")

    async def status(self) -> tuple[SessionInfo, ...]:
        return tuple([await hosted.info() for hosted in list(self._sessions.values())])

    # ---- stopping ---------------------------------------------------------------------------------------------

    async def drain(self, grace_s: float, *, signal: signal.Signals | None = None) -> None:
        """Stop hosting: see the module's docstring. `signal`: the one that asked for it (SIGTERM), so the batches
        it closes name it as `strata run` does. Returns once every session left the host."""
        if self._draining:
            await self._drained.wait()
            return
        self._draining = True
        stop = self._rt.stop
        if signal is not None:
            stop.received = signal
        elif stop.received is None:
            stop.reason = SHUTDOWN_REASON
        why = stop.cause() or SHUTDOWN_REASON
        sessions = list(self._sessions.values())
        log.info("draining", sessions=len(sessions), grace_s=grace_s)
        for hosted in sessions:
            hosted.begin_drain(why)
        with anyio.move_on_after(grace_s):
            for hosted in sessions:
                await hosted.turn_finished()
        for hosted in sessions:
            hosted.interrupt()
        with anyio.move_on_after(CLOSE_BOUND_S):
            for hosted in sessions:
                await hosted.turn_finished()
        for hosted in sessions:
            hosted.stop()
        with anyio.move_on_after(CLOSE_BOUND_S):
            for hosted in sessions:
                await hosted.ended.wait()
        self._drained.set()
        log.info("drained")

    # ---- checks -----------------------------------------------------------------------------------------------

    def _refuse_if_draining(self, session_id: str | None) -> None:
        if self._draining:
            raise HostRefused("shutting_down", "the host is shutting down and takes no new work",
                              session_id=session_id, hint="resume the session with `strata resume ID` or attach "
                              "again once a daemon runs")

    def _make_room(self, session_id: str | None) -> bool:
        """Room for one more hosted session: there is, or the session unused longest leaves the host (released,
        resumable; hosted again when a client attaches to it); `too_many_sessions` when every one is in use. Whether
        one left: it is logged as REPLACED (counted), and neither its leaving nor the new one's hosting is news."""
        limit = self._max_sessions
        staying = [h for h in self._sessions.values() if not h.stopping]
        if len(staying) + self._opening < limit:
            return False
        unused = [h for h in staying if h.unused]
        if unused and len(self._sessions) + self._opening < 2 * limit:  # those leaving count until they are gone
            leaving = min(unused, key=lambda h: h.last_used)
            self._replaced.note(REPLACED, "max_sessions", session_id=leaving.id, max_sessions=limit)
            leaving.stop(quiet=True)
            return True
        raise HostRefused("too_many_sessions", f"the daemon hosts at most {limit} sessions at once, and a client "
                          "is attached to every one of them or a turn runs in it", session_id=session_id,
                          hint="detach from a session you no longer follow, or raise `max_sessions` under "
                          "[daemon] in the user's config file")

    @staticmethod
    def _refuse_if_busy(hosted: HostedSession) -> None:
        if hosted.turn_running:
            raise HostRefused("session_busy", f"a turn of session {hosted.id} is running; one prompt at a time",
                              session_id=hosted.id, hint="wait for its result, or interrupt it")

    def _driving(self, attachment: Attachment) -> HostedSession:
        hosted = self._sessions.get(attachment.session_id)
        if hosted is None or not attachment.attached or attachment not in hosted.attachments:
            raise HostRefused("not_attached", f"this client is not attached to session {attachment.session_id}",
                              session_id=attachment.session_id, hint="attach again")
        if attachment is not hosted.driver:
            raise HostRefused("not_driver", f"this client watches session {hosted.id}; only its driving client "
                              "prompts, approves and interrupts", session_id=hosted.id,
                              hint="attach with role drive once no other client drives it")
        return hosted
