"""One session the host drives: its task, its lease, its attachments and its turns.

The session is driven by one task of the host's task group, as `strata run` drives it: `start_session` or
`resume_session` take its lease, `LiveSession.run` runs each turn. The host holds the lease while a run is in
flight, and between turns only while a driving client is attached (renewing it), as `strata chat` holds its session
between prompts: one session is driven by one process at a time. A session nobody drives holds no lease once it has
been idle RELEASE_AFTER_S, so that `strata resume ID` works from any terminal while the daemon hosts it for its
watchers; a watcher's attach never takes the lease (unless a batch a crash left open must be finished first). A
driver attaching to such a session takes the lease again (`resume_session`, which reads everything again from the
store: another process may have run the session meanwhile), and is refused (SessionActive) while another process
drives it. Requests only set the next turn and wake the task, so they return at once. Committed events reach
every attachment, in commit order, as they are committed (an attachment may first replay those committed before it
came: agent/daemon/_attachment.py); the model's text reaches them as it streams, as `TextDelta`s that are never
persisted. (What another process commits while the daemon holds no lease reaches no attachment as it happens: a
driver attaching later resumes from the store, and each attachment reads those events from the store before the
next one the daemon commits, so none is skipped.)

A hosted session holds no lease while it waits for approval (`parked`, so that `strata approve` from any terminal
can record a decision, as after `--on-ask park`) or after its run failed (`released`): its next turn, or a driver
attaching, resumes it through `resume_session`, which reads everything again from the store. A driver attached
when the run fails has the lease taken back for it at once (read again from the store), or, when that cannot be
done (another process holds it), is told so by a `released` notice: it holds no lease until it attaches again.

Over 400 lines as one concept: one hosted session's life (turns, its driver and watchers, asks, parking, release)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import anyio
import anyio.lowlevel
import structlog
from anyio.abc import TaskStatus

from agent.daemon._approver import DriverApprover
from agent.daemon._attachment import Attachment, Role
from agent.daemon._errors import HostRefused
from agent.daemon._messages import (
    EXIT_INTERRUPTED,
    Notice,
    NoticeKind,
    Outbound,
    Phase,
    SessionEvent,
    SessionInfo,
    TextDelta,
    TurnResult,
    WaitingCall,
)
from agent.delegation import busy_child, waiting_child
from agent.models import close_model
from agent.outcome import RunOutcome
from agent.session import Asking, LiveSession, Runtime, resume_session, start_session
from config import LoadedConfig
from core.errors import LeaseLost, SessionActive, StoreError, StrataError
from core.events import ParkedCall, StoredEvent
from core.model import ModelAdapter, ModelAttempt, ModelListener, ModelRequest, ModelResponse
from core.policy import PermissionRule
from core.record import record
from core.state import SessionState
from core.vocabulary import SessionStatus
from memory.leases import LEASE_TTL, describe, resting_status
from memory.liveness import held_here, make_liveness
from memory.restore import restore_or_report
from memory.rows import LeaseHolder, SessionRecord
from memory.short_lease import WAITING_FOR_LEASE, unless_held_long

log = structlog.get_logger("strata.daemon")

RELEASE_AFTER_S = 2.0
"""How long a session nobody drives keeps its lease once idle: long enough that the client that created it (or a
driver that detached to attach again) attaches without a resume in between, short enough that `strata resume ID`
elsewhere is not refused for longer than a person takes to type it."""


@record
class HostParts:
    """What every hosted session shares."""

    rt: Runtime
    model_factory: Callable[[str], ModelAdapter]
    max_turns: int
    queue_size: int
    workspace_config: Callable[[Path], LoadedConfig] | None = None
    """The config a session in a workspace runs under (the host's config with that workspace's project layer),
    read again whenever the session is opened or resumed, as `strata run` and `strata resume` read it; None: every
    session runs under `rt` as it is."""


class _StopPoint:
    """A hosted session's model, marking where a drain may stop a turn: at a model call, where no effect runs and
    no batch is half decided (a call waiting for approval has its proposal staged, not yet committed). A drain
    stops a turn that is in a model call at once, and any other turn when it reaches its next one; the checkpoint
    makes the stop land here even with a model that never waits (the scripted one)."""

    def __init__(self, model: ModelAdapter, session: HostedSession) -> None:
        self._model = model
        self._session = session

    @property
    def name(self) -> str:
        return self._model.name

    async def complete(self, request: ModelRequest, listener: ModelListener | None = None) -> ModelResponse:
        self._session.in_model = True
        try:
            self._session.stop_if_draining()
            await anyio.lowlevel.checkpoint()
            return await self._model.complete(request, listener)
        finally:
            self._session.in_model = False

    async def aclose(self) -> None:
        """The session's release closes the model it wraps (agent/models.py `close_model`)."""
        await close_model(self._model)


class _Deltas:
    """The hosted session's model listener: the model's text, as it streams, to every attachment (TextDelta)."""

    def __init__(self, session: HostedSession) -> None:
        self._session = session
        self._attempt = 1
        self._offset = 0

    def on_text(self, delta: str) -> None:
        if delta:
            self._session.stream(TextDelta(session_id=self._session.id, text=delta, attempt=self._attempt,
                                           offset=self._offset))
            self._offset += len(delta)

    def on_attempt(self, attempt: ModelAttempt) -> None:
        # a retried attempt's text is void and the next one starts over; any other outcome ends the model call
        self._attempt = attempt.number + 1 if attempt.outcome == "retry" else 1
        self._offset = 0


def _turn_unfinished(state: SessionState) -> bool:
    """A turn was cut short before the model answered the last message (the user's prompt, or a batch's results).
    `strata resume ID` continues it; so does a driver attaching after a crash (not after an interrupt or a drain,
    which the person or the operator chose)."""
    return state.ended is None and bool(state.messages) and state.messages[-1].role == "user"


def _undecided(state: SessionState) -> tuple[ParkedCall, ...]:
    return tuple(p for p in state.parked.values() if p.call_id not in state.approvals)


class HostedSession:
    def __init__(self, parts: HostParts, session_id: str = "", *, quiet: bool = False) -> None:
        """`quiet`: its hosting is logged at debug (it replaced another at max_sessions: the host counts those)."""
        self._parts = parts
        self._quiet_start = quiet
        self._quiet_end = False
        self._rt = parts.rt
        """The runtime as this session sees it (its workspace's config; see HostParts.workspace_config)."""
        self.id = session_id
        self.attachments: list[Attachment] = []
        self.driver: Attachment | None = None
        self.live: LiveSession | None = None
        self.approver = DriverApprover(lambda: self.driver, self._send)
        self.phase: Phase = "starting"
        self.turn_running = False
        self.parked: tuple[ParkedCall, ...] = ()
        """Calls waiting for a recorded decision, as the last run left them (a parked session)."""
        self.workspace = ""
        self.model = ""
        self.ended = anyio.Event()
        self.last_used = anyio.current_time()
        """When a client last attached, detached or gave it a turn: the session unused longest leaves the host first
        when it is full (SessionHost.max_sessions)."""
        self._next: tuple[str | None] | None = None
        self._stopping = False
        self._draining = False
        self._wake = anyio.Event()
        self._turn_scope: anyio.CancelScope | None = None
        self._turn_done = anyio.Event()
        self._turn_done.set()
        self.in_model = False
        """The running turn waits on the model (see _StopPoint)."""
        self._deltas = _Deltas(self)
        self._parked_by_run = False
        """The last turn ended with calls parked (see _ask_a_late_driver)."""
        self.head_seq = 0
        """The session's last committed seq as this host knows it (what it read, or saw committed): an attachment
        starts after it, and reads from the store what it finds committed beyond it that the host never saw
        (agent/daemon/_attachment.py)."""
        self._held_from: SessionStatus | None = None
        """The session's status when the host took its lease (its resume makes it `active`): for a driver between
        turns, or by a turn that resumed it. The lease is let go with it again unless a run ended or was
        interrupted meanwhile (the run commits its own status); after a failed turn, with the status derived from
        the state the turn left (memory/leases.py `resting_status`). Left `active`, a session nobody runs would
        read as one whose process died holding it, and the next driver's attach would continue a turn the person
        interrupted."""

    # ---- opening (in the session's own task) ------------------------------------------------------------------

    async def start_new(self, workspace: Path, model: ModelAdapter, rules: Sequence[PermissionRule],
                        max_turns: int | None) -> None:
        rt = self._rt = await self._runtime_for(workspace)
        self.live = await start_session(rt, model=_StopPoint(model, self), workspace=workspace, mode="ipc",
                                        rules=list(rules), prompt=None, max_turns=max_turns or self._parts.max_turns,
                                        observer=self._observe, asking=Asking(approver=self.approver),
                                        listener=self._deltas)
        self.id = self.live.id
        self._opened(self.live.loop.state)

    async def open_existing(self) -> None:
        """Resume the session under its lease; a batch left open (by a crash, or parked) is finished at once,
        its waiting calls asked of the driver, and a driver continues a turn a crash cut short before the model
        answered (as `strata resume ID` does). A parked session only watchers attached to stays parked (no lease).
        Whether a driver is there is read after each wait, not from the attach that opened it: a driver may
        attach while a watcher's attach opens the session, and is then asked as if it had come first."""
        rt = self._parts.rt
        # A lease held for a moment (a decision, a reconcile) is waited out, so that what is read next is what it
        # left; one held longer is refused: a driver cannot drive the session, and a watcher would get nothing of
        # that process's run live.
        record = await unless_held_long(self._unleased, waiting=self._log_waiting)
        self.workspace, self.model = record.workspace, record.model
        if record.status == "awaiting_approval" and self.driver is None:
            parked_state = (await restore_or_report(rt.store, self.id)).state
            self.parked, self.head_seq = _undecided(parked_state), parked_state.last_seq
            self.phase = "parked"
            if self.driver is not None and self.parked:  # it attached during the read: it is asked, as below
                self.submit(None)
            return
        if self.driver is None:  # watchers only: hosted without the lease, unless a batch is left to finish
            state = (await restore_or_report(rt.store, self.id)).state
            if state.open_batch is None and self.driver is None:
                self._opened(state)
                return
        self.live = await self._resume_when_free(None)
        self._held_from = record.status
        state = self.live.loop.state
        self._opened(state)
        crashed = record.status == "active"  # its last process died holding the lease (a drain leaves it idle)
        if state.open_batch is not None or (self.driver is not None and crashed and _turn_unfinished(state)):
            self.submit(None)

    async def _unleased(self) -> SessionRecord:
        """The session's record while no live process holds its lease; SessionActive while one does."""
        rt = self._parts.rt
        record = await rt.store.get_session(self.id)
        if record.lease is not None and record.parent_id is not None and held_here(record.lease):
            raise HostRefused("session_busy", f"session {self.id} is a child session this daemon runs for a "
                              f"delegate call of session {record.parent_id}; its calls are asked of that session's "
                              "driver", session_id=self.id,
                              hint=f"attach to session {record.parent_id} to follow or drive it")
        if record.lease is not None and make_liveness(rt.clock)(record.lease):
            raise SessionActive(self.id, describe(record.lease), record.lease)
        return record

    async def _runtime_for(self, workspace: Path) -> Runtime:
        """The runtime under the config of `workspace` (its project layer when it is still a directory)."""
        read = self._parts.workspace_config
        if read is None:
            return self._parts.rt
        project = workspace if await anyio.Path(workspace).is_dir() else None
        config = await anyio.to_thread.run_sync(read, project) if project is not None else None
        if config is None:
            return self._parts.rt
        return await anyio.to_thread.run_sync(self._parts.rt.for_config, config)

    def _opened(self, state: SessionState) -> None:
        self.workspace, self.model, self.phase = state.workspace, state.model, "idle"
        self.head_seq = max(self.head_seq, state.last_seq)

    async def _resume_when_free(self, prompt: str | None) -> LiveSession:
        """`_resume`, waiting up to SHORT_LEASE_S for a lease another process holds (`strata approve|deny` and
        `strata reconcile` hold it for milliseconds while they record something; a driver attaching to a parked
        session meets them when two people decide at once); SessionActive once that is over (the other process
        drives the session)."""
        return await unless_held_long(lambda: self._resume(prompt), waiting=self._log_waiting)

    def _log_waiting(self, exc: SessionActive) -> None:
        log.info(WAITING_FOR_LEASE, session_id=self.id, owner=exc.owner)

    async def _resume(self, prompt: str | None) -> LiveSession:
        factory = self._parts.model_factory
        self._rt = await self._runtime_for(Path(self.workspace))
        return await resume_session(self._rt, self.id, rules=[],
                                    model_factory=lambda spec: _StopPoint(factory(spec), self), observer=self._observe,
                                    asking=Asking(approver=self.approver), prompt=prompt, listener=self._deltas)

    # ---- the task ---------------------------------------------------------------------------------------------

    async def serve(self, open_session: Callable[[], Awaitable[None]], *,
                    task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED) -> None:
        """The session's task: open it (an error comes out of the host's `tg.start` as itself), then run its turns
        until it is stopped; then release the lease and close the attachments. A failure here is logged and ends
        this session only, never the host."""
        try:
            await open_session()
        except BaseException as exc:
            self._close_all("closed", f"the session could not be opened: {self._mask(str(exc))}")
            self.ended.set()
            raise
        structlog.contextvars.bind_contextvars(session_id=self.id)  # this task's own context
        (log.debug if self._quiet_start else log.info)("session hosted", phase=self.phase)
        task_status.started(self.id)
        try:
            while not self._stopping:
                if self._next is None:
                    await self._idle()
                    continue
                (prompt,), self._next = self._next, None
                await self._turn(prompt)
                self._ask_a_late_driver()
        except Exception as exc:  # a bug: this session leaves the host, the others go on
            log.error("hosted session failed", error_type=type(exc).__name__, exc_info=True)
        finally:
            with anyio.CancelScope(shield=True):
                await self._release()
                self._close_all("closed", "the session left the host; it can be resumed by id")
                self.ended.set()
            (log.debug if self._quiet_end else log.info)("session left the host")

    async def drive(self) -> None:
        """A driver attached: take the lease of a session hosted without it (idle, nobody drove it), so that it is
        driven here and nowhere else until it leaves again. Waits up to SHORT_LEASE_S for a lease another
        process holds, then SessionActive (another process drives the session). A session released after a failed
        turn is taken the same way. Nothing to do while the session holds its lease, runs a turn, or waits for
        decisions (its next turn takes the lease)."""
        if self.live is not None or self.turn_running or self._next is not None or self.phase not in ("idle",
                                                                                                      "released"):
            return
        # the status as a moment's holder (a decision) left it, not as it was while held
        before = (await unless_held_long(self._unleased, waiting=self._log_waiting)).status
        live = await self._resume_when_free(None)
        if self.live is not None or self.stopping:  # taken meanwhile, or leaving the host: not twice, not kept
            with anyio.CancelScope(shield=True), contextlib.suppress(StrataError):
                await live.release(None)
            return
        self.live, self._held_from = live, before
        state = live.loop.state
        self._opened(state)
        self._wake.set()  # the idle task renews it from now on
        # Another process may have run it meanwhile: a batch it parked calls of, or one its crash left open, is
        # finished and its waiting calls asked of this driver, as when a driver's attach opens the session. A batch
        # whose delegate call waits on a child another process drives is left alone: finishing it would only wait
        # on that child (a prompt is refused naming it, as while the lease was held).
        if state.parked or (before == "active" and (state.open_batch is not None or _turn_unfinished(state))):
            self.submit(None)

    async def reread_parked(self) -> None:
        """Parked here without the lease, the session's calls may have been decided and run by another process
        meanwhile (`strata approve`, then `strata resume ID` elsewhere): what still waits is read again from the
        store, and a session with nothing left waiting and no batch open is idle again (a driver attaching to it
        takes its lease, `drive`, instead of being given a turn that has nothing to finish)."""
        if self.live is not None or self.turn_running or not (self.parked or self.phase == "parked"):
            return
        with contextlib.suppress(StrataError):
            state = (await restore_or_report(self._parts.rt.store, self.id)).state
            if self.live is not None or self.turn_running or not (self.parked or self.phase == "parked"):
                return  # a turn began meanwhile
            self.parked = _undecided(state)
            if not self.parked and state.open_batch is None and self.phase == "parked":
                self.phase = "idle"

    async def waits_on_a_busy_child(self) -> bool:
        """Its open batch's delegate call waits on a child another live process drives: finishing the batch now
        would only wait on that process (agent/delegation.py `busy_child`)."""
        with contextlib.suppress(StrataError):
            return await busy_child(self._parts.rt.store, self.id, make_liveness(self._parts.rt.clock)) is not None
        return False

    async def _idle(self) -> None:
        """Wait for the next request; keep the lease renewed meanwhile, as a running turn's heartbeat does, while a
        driver is attached. With none, the lease is released once the session was idle RELEASE_AFTER_S."""
        self._wake = anyio.Event()
        if self.live is None:
            await self._wake.wait()
            return
        if self.driver is None:
            with anyio.move_on_after(RELEASE_AFTER_S):
                await self._wake.wait()
                return
            if self.driver is None and self._next is None and not self.turn_running and self.live is not None:
                await self._release()
                log.debug("lease released: no client drives the session")
            return
        with anyio.move_on_after(LEASE_TTL.total_seconds() / 3):
            await self._wake.wait()
            return
        live = self.live
        holder = live.holder.model_copy(update={"expires_at": self._parts.rt.clock.now() + LEASE_TTL})
        try:
            renewed = await self._parts.rt.store.renew_lease(self.id, holder)
        except StoreError as exc:  # busy for longer than the busy timeout: the lease is still good, try again
            log.warning("lease renewal failed; retrying at the next beat", reason=str(exc))
            return
        if renewed:
            live.holder = holder
            return
        log.error("the session's lease was taken by another process; it is no longer hosted here")
        self.live, self.phase = None, "released"
        self._broadcast(Notice(session_id=self.id, kind="released",
                               text="another process took this session's lease; the host no longer drives it"))

    def _ask_a_late_driver(self) -> None:
        """The run parked, but a driver is attached now: it attached after the park (the driver a call was asked
        of had left, or there was none), so it is asked about the parked calls, as a driver attaching to a parked
        session is (SessionHost.attach)."""
        if self._parked_by_run and self.driver is not None and not self._draining:
            self.submit(None)

    def submit(self, prompt: str | None) -> None:
        """The next turn (None: finish the open batch). The caller checked that no turn runs."""
        self.turn_running = True
        self.last_used = anyio.current_time()
        self._turn_done = anyio.Event()
        self._next = (prompt,)
        self._wake.set()

    @property
    def stopping(self) -> bool:
        """It is leaving the host (or left)."""
        return self._stopping or self.ended.is_set()

    @property
    def unused(self) -> bool:
        """Hosted, open, and nobody uses it: no client attached, no turn running or asked for."""
        return not (self.attachments or self.turn_running or self.stopping or self._next is not None
                    or self.phase == "starting")

    def stop(self, *, quiet: bool = False) -> None:
        """Leave the host (`quiet`: made to, for room at max_sessions; the host counts those, see `serve`)."""
        self._quiet_end = self._quiet_end or quiet
        self._stopping = True
        self._wake.set()

    async def _turn(self, prompt: str | None) -> None:
        outcome: RunOutcome | None = None
        error: StrataError | None = None
        self._parked_by_run = False
        self.approver.new_run()
        try:
            if self._draining:  # accepted just before the drain began: it does not start
                self._broadcast(TurnResult(session_id=self.id, status="interrupted", exit_code=EXIT_INTERRUPTED,
                                           reason="the host is shutting down; the turn did not start"))
                return
            with anyio.CancelScope() as scope:
                self._turn_scope = scope
                try:
                    if self.live is None:
                        before = (await self._parts.rt.store.get_session(self.id)).status
                        self.live = await self._resume_when_free(prompt)
                        self.parked, self._held_from = (), before
                    self.phase = "act" if self.live.loop.state.open_batch is not None else "plan"
                    outcome = await self.live.run(prompt)
                except StrataError as exc:
                    error = exc
            self._turn_scope = None
            with anyio.CancelScope(shield=True):
                await self._ended(outcome, error, scope.cancelled_caught)
        finally:
            self.turn_running = False
            self._turn_done.set()

    async def _ended(self, outcome: RunOutcome | None, error: StrataError | None, interrupted: bool) -> None:
        if error is None:
            self._held_from = None  # the run committed the status the lease is let go with (its end, or `idle`)
        elif self.live is not None and self._held_from is not None:
            # It committed none: the status the session had before it was resumed, unless what the turn committed
            # changed it (a batch it finished, calls it parked), not the `active` of a process that died holding it.
            self._held_from = resting_status(self.live.loop.state, self._held_from)
        if outcome is not None:
            assert self.live is not None
            if outcome.status == "awaiting_approval":
                # Its calls wait for a decision, or its delegate call waits on a child that does. The lease goes, so
                # that `strata approve` can record a decision from anywhere; a driver that attaches after a park is
                # asked (a child's calls through the parent, which enters its delegate call again).
                parked = _undecided(self.live.loop.state)
                await self._release()
                self.parked, self.phase = parked, "parked"
                self._parked_by_run = bool(parked) or self.approver.parked_this_run
                self._broadcast(TurnResult.of(outcome, parked))
                return
            self.phase = "idle"
            self._broadcast(TurnResult.of(outcome, ()))
            return
        if error is not None:
            await self._release()
            self.phase = "released"
            log.warning("turn failed", error=str(error))
            # A session taken over by another process (this host's lease expired unrenewed) is that process's now:
            # taking it back at once would drive it from here again behind its back (ping-pong between workers).
            refused = ("another process took the session over" if isinstance(error, LeaseLost)
                       else await self._take_back_for_driver())
            self._broadcast(TurnResult(session_id=self.id, status="failed", exit_code=error.exit_code,
                                       reason=self._mask(error.message)))
            if refused is not None and self.driver is not None:
                self._send(self.driver, Notice(
                    session_id=self.id, kind="released", text=f"the turn failed and the host could not take the "
                    f"session's lease back for this client ({refused}); it holds none, so another process may "
                    "resume the session meanwhile: attach again to drive it here"))
            return
        cause = self._parts.rt.stop.cause() or "the turn was interrupted"
        self.phase = "idle" if self.live is not None else ("parked" if self.parked else "released")
        reason = (f"{cause}: running calls were stopped; started effects are recorded as unknown, and every call "
                  "has its result" if interrupted else cause)
        self._broadcast(TurnResult(session_id=self.id, status="interrupted", exit_code=EXIT_INTERRUPTED,
                                   reason=reason, unknown_receipts=await self._unknown_receipts()))

    async def _take_back_for_driver(self) -> str | None:
        """After a failed turn (its lease let go, what it holds read again from the store): a driver still attached
        drives the session alone, so the lease is taken again at once, as a driver's attach takes it (`drive`).
        Returns why it was not taken, for the driver's notice: another process holds it, the resume fails, or a
        batch is still open (it is not finished again unasked: the same failure could repeat without end; calls
        waiting for a decision are asked of a driver that attaches again). None: taken, or no driver to take it
        for (watchers need no lease; a draining host takes nothing)."""
        if self.driver is None or self._draining or self.stopping:
            return None
        try:
            # the status the failed turn left, given back with the lease unless a turn runs meanwhile (`_held_from`)
            before = (await self._parts.rt.store.get_session(self.id)).status
            live = await self._resume(None)
        except StrataError as exc:
            return self._mask(exc.message)
        state = live.loop.state
        if state.open_batch is not None or self.driver is None or self.stopping:
            with anyio.CancelScope(shield=True), contextlib.suppress(StrataError):
                await live.release(None)
            self.parked = _undecided(state)
            if self.parked:
                self.phase = "parked"
            return "a batch is still open" + (f": {', '.join(p.call_id for p in self.parked)} wait for a decision"
                                              if self.parked else "")
        self.live, self.parked, self._held_from = live, (), before
        self._opened(state)
        return None

    async def _unknown_receipts(self) -> int:
        """The session's receipts left unknown (an interrupted turn has no outcome of the loop's to say so)."""
        try:
            return len(await self._parts.rt.store.list_receipts(self.id, status="unknown"))
        except StrataError as exc:
            log.warning("unknown receipts not counted", error=str(exc))
            return 0

    async def _release(self) -> None:
        live, self.live = self.live, None
        status, self._held_from = self._held_from, None
        if live is not None:
            with anyio.CancelScope(shield=True), contextlib.suppress(StrataError):
                await live.release(status)  # None: the status is what the run committed

    # ---- interrupts and drains ----------------------------------------------------------------------------------

    def interrupt(self) -> bool:
        """Cancel the running turn, as Ctrl-C does (the loop closes its batch). Whether a turn was running."""
        if self._turn_scope is None:
            return False
        self.approver.withdraw()  # before the cancellation reaches the ask: an approval after this is refused
        self._turn_scope.cancel()
        return True

    def begin_drain(self, why: str) -> None:
        """No new turn; a call waiting for the driver parks now; a running turn stops at its next model call (at
        once if it is in one)."""
        self._draining = True
        self.approver.park_all(why)
        self._broadcast(Notice(session_id=self.id, kind="shutting_down", text=why))
        if self.in_model:
            self.interrupt()

    async def turn_finished(self) -> None:
        await self._turn_done.wait()

    def stop_if_draining(self) -> None:
        if self._draining:
            self.interrupt()

    # ---- attachments ------------------------------------------------------------------------------------------

    def add(self, role: Role, who: str, since_seq: int | None = None) -> Attachment:
        """Subscribe a new attachment; with `since_seq` it first replays the committed events from that seq (the
        subscription comes first, so nothing committed meanwhile is lost: agent/daemon/_attachment.py)."""
        if role == "drive" and self.driver is not None:
            raise HostRefused("not_driver", f"session {self.id} already has a driving client; one client drives a "
                              "session at a time", session_id=self.id,
                              hint="attach with role watch to follow it, or wait until the driver detaches")
        store = self._parts.rt.store
        session_id = self.id

        async def read(after_seq: int, upto_seq: int) -> list[StoredEvent]:
            return await store.read_events(session_id, after_seq, upto_seq)

        attachment = Attachment(self.id, role, who, self._parts.queue_size,
                                replay=None if since_seq is None else (read, since_seq), fill=(read, self.head_seq))
        self.attachments.append(attachment)
        self.last_used = anyio.current_time()
        if role == "drive":
            self.driver = attachment
        return attachment

    def remove(self, attachment: Attachment, kind: NoticeKind, text: str) -> None:
        if attachment in self.attachments:
            self.attachments.remove(attachment)
            self.last_used = anyio.current_time()
        if attachment is self.driver:
            self.driver = None
            self._wake.set()  # an idle session nobody drives lets its lease go (_idle)
            if self.approver.driver_left(attachment):
                self._broadcast(Notice(session_id=self.id, kind="parked", text="the driving client left while a "
                                       "call waited for its approval; the call is parked"))
            if kind != "closed":  # the session stays: its watchers may drive it now (closing, they all go)
                self._broadcast(Notice(session_id=self.id, kind="driver_left", text="the driving client left; "
                                       "nobody drives the session now: attach with role drive to drive it"))
        attachment.close(Notice(session_id=self.id, kind=kind, text=text))

    def driver_attached(self, driver: Attachment) -> None:
        """A driving client attached and drives the session now: its watchers hear it (`driver_attached`), as they
        hear `driver_left` when it goes, so a watcher told it may drive learns that it no longer may."""
        notice = Notice(session_id=self.id, kind="driver_attached", text="a driving client attached; it drives the "
                        "session now: watchers follow it, and a second driver is refused until it leaves")
        for attachment in list(self.attachments):
            if attachment is not driver:
                self._send(attachment, notice)

    def _send(self, attachment: Attachment, message: Outbound) -> bool:
        if attachment.offer(message):
            return True
        log.warning("attachment dropped: it did not keep up", attachment=attachment.id, role=attachment.role)
        self.remove(attachment, "dropped", "this client did not read the session's messages fast enough and was "
                    "detached; attach again to follow the session")
        return False

    def _broadcast(self, message: Outbound) -> None:
        for attachment in list(self.attachments):
            self._send(attachment, message)

    def stream(self, delta: TextDelta) -> None:
        """The model's text as it streams: offered to each attachment, which drops it if it is behind."""
        for attachment in self.attachments:
            attachment.offer_delta(delta)

    def _close_all(self, kind: NoticeKind, text: str) -> None:
        for attachment in list(self.attachments):
            self.remove(attachment, kind, text)

    def committed_elsewhere(self, item: StoredEvent) -> None:
        """An event of this session committed by what holds its lease while the host does not (its parent's
        delegate call, in this process): to every attachment, as its own commits go."""
        self.head_seq = max(self.head_seq, item.seq)
        self._broadcast(SessionEvent(session_id=item.session_id, item=item))

    def _observe(self, item: StoredEvent) -> None:
        """Every committed event, as it is committed (the loop's observer): to every attachment, in order."""
        self.head_seq = max(self.head_seq, item.seq)
        self._broadcast(SessionEvent(session_id=item.session_id, item=item))
        if self.live is not None and self.turn_running:
            self.phase = "act" if self.live.loop.state.open_batch is not None else "plan"

    def _mask(self, text: str) -> str:
        return self._rt.masker.mask(text)

    # ---- status -----------------------------------------------------------------------------------------------

    async def _child_waiting(self) -> tuple[WaitingCall, ...]:
        """Parked on a delegate call whose child waits for a decision: the calls that wait, naming the session that
        holds them (the child, or a session below it the child waits on in turn), so that a person knows what to
        approve and where. Empty when no child holds an undecided call (or it cannot be read)."""
        store = self._parts.rt.store
        with contextlib.suppress(StrataError):
            if (child := await waiting_child(store, self.id)) is not None:
                return tuple(WaitingCall(call_id=p.call_id, tool=p.tool, how="parked", session_id=child)
                             for p in _undecided((await restore_or_report(store, child)).state))
        return ()

    async def info(self) -> SessionInfo:
        lease: LeaseHolder | None = None
        try:
            record = await self._parts.rt.store.get_session(self.id)
            status: str = record.status
            lease = record.lease
        except StrataError:
            status = "unknown"
        await self.reread_parked()  # no lease here: another process may have decided and run them meanwhile
        asking = self.approver.waiting(self.id)
        phase: Phase = "approval" if asking else self.phase
        if (self.live is None and not self.turn_running and lease is not None and not held_here(lease)
                and make_liveness(self._parts.rt.clock)(lease)):
            phase = "elsewhere"  # hosted without its lease, which another live process holds: it runs there
        parked = self.parked
        # No lease here, idle and nobody driving: another process may have run the session and parked calls.
        if self.live is None and not self.turn_running and not parked and status == "awaiting_approval":
            with contextlib.suppress(StrataError):
                parked = _undecided((await restore_or_report(self._parts.rt.store, self.id)).state)
            if parked and phase == "idle":
                phase = "parked"
        waiting = (*asking, *(WaitingCall(call_id=p.call_id, tool=p.tool, how="parked") for p in parked))
        if not waiting and self.live is None and not self.turn_running and status == "awaiting_approval":
            waiting = await self._child_waiting()
        return SessionInfo(session_id=self.id, status=status, phase=phase, turn_running=self.turn_running,
                           workspace=self.workspace, model=self.model,
                           drivers=1 if self.driver is not None else 0,
                           watchers=sum(1 for a in self.attachments if a.role == "watch"), waiting=waiting)
