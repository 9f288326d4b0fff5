"""One channel message through its thread's session, exactly once.

The steps, each durable before the next, so a crash anywhere is recovered by doing the same steps again:

1. the book says whether the message was taken in already: replied or acknowledged means only the
   acknowledgement may be missing (it is given again), and a reply found in the outbox (the probe) means only
   the book's note of it is, unless the thread's session is still in the middle of the message's turn (the reply
   came from the model's `reply` call): that turn is finished as step 4 says; taken in by another thread, the
   id is that thread's message's, and this one is rejected with the reason (never acknowledged as a
   redelivery, nor run on the other message's record);
2. the thread's session: the one the book binds the thread to, or a new one in DAEMON mode bound now, for ever;
3. the message is taken in (book row, with the gate's verdict, and its task when the gate says so);
4. the turn: the message is the user message that starts it, headed by a line naming the channel, thread and
   message id, so the commit that starts the turn records the message id; a session that already has that line
   does not get it again: an unfinished turn is continued (as `strata resume` continues one), a finished one is
   not run again. The turn has `turn_budget_s`; past it the turn is closed as Ctrl-C closes it;
5. the reply, named by the message's idempotency key (the outbox never takes a key twice), then the book's
   `replied` and `acked`, then the channel's acknowledgement (a crash before it: the message is redelivered and
   step 1 acknowledges it again)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import anyio
import structlog

from agent.channels._messages import Channel, InboundMessage, Reply
from agent.channels._reply_tool import Current, reply_rule
from agent.delegation import busy_child, waiting_child
from agent.models import closed_on_failure
from agent.outcome import RunOutcome
from agent.reconcile import probe_receipts
from agent.session import Asking, LiveSession, Runtime, resume_session, start_session
from config import ChannelEntry
from core.action_required import DEFAULT_VOCABULARY, GateVerdict, GateVocabulary, decide
from core.errors import LeaseLost, SessionActive, StrataError
from core.events import BatchCompleted, StoredEvent, UserMessage
from core.faults import fault_point
from core.messages import Message, TextBlock
from core.model import ModelAdapter
from core.record import record
from core.state import SessionState
from core.tools import ToolSpec
from memory.channel_book import ChannelBook, IntakeRow, TaskRow
from memory.leases import make_liveness
from memory.restore import restore_or_report

log = structlog.get_logger("strata.channels")

Outcome = str
"""How a message was handled: `processed`, `redelivered` (acknowledged again), `deferred` (left for later),
`rejected` (set aside unhandled, with the reason: its id is another thread's message's)."""


@record
class ChannelParts:
    """What the turns of one channel share."""

    rt: Runtime
    """The runtime in DAEMON mode: execute and admin tools left out unless enabled by name."""
    book: ChannelBook
    channel: Channel
    entry: ChannelEntry
    model: Callable[[], ModelAdapter]
    max_turns: int
    turn_budget_s: float
    current: Current = dataclasses.field(default_factory=dict)
    """The message each session's running turn handles (the `reply` tool reads it)."""
    vocabulary: GateVocabulary = DEFAULT_VOCABULARY


def daemon_runtime(rt: Runtime, enable: tuple[str, ...], reply: ToolSpec | None = None,
                   channel: str = "") -> Runtime:
    """`rt` as a channel's sessions see it: tools of safety level execute and admin are removed from the plan
    unless the operator enabled them by name (`daemon.enable`); the channel's `reply` tool is added, and allowed, and
    the runtime is the channel's: the one that resumes its thread sessions (any other refuses to, agent/session.py)."""
    kept = [t for t in rt.tools if t.safety not in ("execute", "admin") or t.name in enable]
    if reply is None:
        return dataclasses.replace(rt, tools=kept)
    return dataclasses.replace(rt, tools=[*kept, reply], config_rules=(*rt.config_rules, reply_rule(channel)),
                               channel=channel)


def marker(message: InboundMessage) -> str:
    """The head of a message's first prompt line (agent/session.py reads it to name a refused channel session)."""
    return f"[channel {message.channel} · thread {message.thread} · message {message.id}"


def prompt_of(message: InboundMessage, verdict: GateVerdict, task: TaskRow | None) -> str:
    lines = [f"{marker(message)}" + (f" · from {message.sender}]" if message.sender else "]")]
    if task is not None:
        lines.append(f"[task {task.id}: the action-required gate made this message a task (rule {verdict.rule}); "
                     "do the work it asks for]")
    lines.append("[answer with the `reply` tool (once); if you do not, your last text is sent as the reply]")
    for a in message.attachments:
        lines.append(f"[attachment {a.name} sha256 {a.sha256}" + (f" at {a.path}]" if a.path else "]"))
    lines.append(message.text)
    return "\n".join(lines)


async def handle(parts: ChannelParts, message: InboundMessage, handle: str) -> Outcome:
    book, channel = parts.book, parts.channel
    key = message.reply_key
    known = await anyio.to_thread.run_sync(book.intake, message.channel, message.id)
    if known is not None and known.thread_id != message.thread:  # the id is another thread's message: not this one
        return await reject_taken(parts, message, handle, known.thread_id)
    if known is not None and (known.status != "started" or (await anyio.to_thread.run_sync(channel.sent, key)
                                                            and not await _cut_short(parts, known.session_id))):
        await _finish(parts, message, handle)
        log.info("message redelivered: acknowledged again", channel=message.channel, message_id=message.id)
        return "redelivered"
    verdict = decide(message.text, attachments=len(message.attachments), vocabulary=parts.vocabulary)
    entry = parts.entry
    asking = Asking(on_ask=entry.on_ask)
    live: LiveSession | None = None
    session_id = await anyio.to_thread.run_sync(book.session_of, message.channel, message.thread)
    try:
        if session_id is None:
            async with closed_on_failure(parts.model()) as model:
                live = await start_session(parts.rt, model=model, workspace=Path(entry.workspace), mode="daemon",
                                           rules=[], prompt=None, max_turns=parts.max_turns, asking=asking)
            session_id = await anyio.to_thread.run_sync(book.bind, message.channel, message.thread, live.id)
            assert session_id == live.id  # one poller a channel, one worker a thread: nothing else binds it
        else:
            waiting = _undecided((await restore_or_report(parts.rt.store, session_id)).state)
            if waiting:  # parked calls wait for `strata approve|deny`: the thread's next message waits too
                log.info("thread's session waits for approval; the message stays queued", channel=message.channel,
                         thread=message.thread, message_id=message.id, calls=list(waiting))
                return "deferred"
            if (child := await _child_in_the_way(parts.rt, session_id)) is not None:
                # its open batch would park again before the message's prompt is heard: the message waits too
                log.info("thread's session waits for its child; the message stays queued", channel=message.channel,
                         thread=message.thread, message_id=message.id, reason=child)
                return "deferred"
            await _probe_uncertain(parts.rt, session_id)
            async with closed_on_failure(parts.model()) as model:
                live = await resume_session(parts.rt, session_id, rules=[], model=model,
                                            max_turns=parts.max_turns, asking=asking)
    except (SessionActive, StrataError) as exc:
        log.warning("thread's session cannot take the message now; it stays queued", channel=message.channel,
                    thread=message.thread, message_id=message.id, reason=str(exc))
        if live is not None:
            await live.release(None)
        return "deferred"
    taken_by: str | None = None
    try:
        row = IntakeRow(channel=message.channel, message_id=message.id, thread_id=message.thread,
                        session_id=session_id, sender=message.sender, rule=verdict.rule, reply_key=key,
                        after_seq=live.loop.state.last_seq)
        row = await anyio.to_thread.run_sync(book.take_in, row)  # a second attempt gets the first record
        if row.thread_id != message.thread:  # another thread's message took the id meanwhile (another daemon's)
            taken_by = row.thread_id
            return "rejected"
        task = None
        if verdict.task:
            task = await anyio.to_thread.run_sync(book.add_task, message.channel, message.thread, message.id,
                                                  session_id, verdict.rule)
        try:
            reply = await _turn(parts, live, message, verdict, task, row.after_seq)
            if reply is None:  # its child became busy, or parked, since it was checked: the same as above
                log.info("thread's session still waits for an earlier call; the message stays queued",
                         channel=message.channel, thread=message.thread, message_id=message.id)
                return "deferred"
        except LeaseLost as exc:  # another worker took the session over (this one was stopped past its lease):
            # the message is that worker's now; a reply from here ("the turn failed") would be the one kept
            log.warning("thread's session was taken over by another worker; the message is left to it",
                        channel=message.channel, thread=message.thread, message_id=message.id, reason=exc.message)
            return "deferred"
    finally:
        # a turn that ran recorded its end; one that did not (the message's turn had ended before a crash, or the
        # message was empty) would leave the resumed session `active`, read as a crash: it rests as it ended
        await live.release(live.loop.state.ended)
        if taken_by is not None:
            await reject_taken(parts, message, handle, taken_by)
    if task is not None:  # before the reply goes out: a redelivery after it is only acknowledged (step 1), and
        # a task set after the send stayed `open` for ever when the daemon died in between
        fault_point("before_task_status")
        await anyio.to_thread.run_sync(book.set_task_status, task.id, task_status(reply.status))
    await anyio.to_thread.run_sync(channel.send, reply)
    fault_point("after_reply_sent")
    await _finish(parts, message, handle)
    log.info("message processed", channel=message.channel, thread=message.thread, message_id=message.id,
             session_id=session_id, status=reply.status, task=task.id if task else None)
    return "processed"


async def _cut_short(parts: ChannelParts, session_id: str) -> bool:
    """Whether the thread's session is in the middle of a turn that nothing waits on (a reply found in the outbox
    for a message the book calls `started` then came from the model's `reply` call, and the daemon died before
    the turn ended): the turn is finished (step 4), not only acknowledged, else its task stayed `open` and the
    calls after the reply never ran. A turn that waits for approval is the thread's next message's to finish."""
    state = (await restore_or_report(parts.rt.store, session_id)).state
    return _unfinished(state) and not _undecided(state)


async def _child_in_the_way(rt: Runtime, session_id: str) -> str | None:
    """Why the session's open batch cannot finish now, if a delegate call of it waits on a child (or a session
    below it) that another process drives or that waits for a decision; None when none does."""
    if (busy := await busy_child(rt.store, session_id, make_liveness(rt.clock))) is not None:
        return f"child session {busy.session_id} is being run by another process ({busy.owner})"
    if (child := await waiting_child(rt.store, session_id)) is not None:
        return f"child session {child} waits for approval"
    return None


async def reject_taken(parts: ChannelParts, message: InboundMessage, handle: str, thread: str) -> Outcome:
    """A message reusing an id another thread's message took is set aside with the reason: acknowledged as a
    redelivery it would be dropped unanswered, and handled it would share the other message's record and reply."""
    why = (f"message id {message.id!r} is already taken by thread {thread!r} of channel {message.channel!r}; "
           f"this message (thread {message.thread!r}) was not handled: send it again under a new id")
    await anyio.to_thread.run_sync(parts.channel.reject, handle, why)
    return "rejected"


async def _probe_uncertain(rt: Runtime, session_id: str) -> None:
    """Effects of the thread's session whose outcome is uncertain (`unknown`, or `dispatched` by a daemon that
    died) are reconciled by their tools' probes before its next turn, as `strata reconcile --probe` does: the
    `reply` tool's asks the channel whether the reply's key was delivered. Undecided ones stay for a person."""
    uncertain = [*await rt.store.list_receipts(session_id, status="unknown"),
                 *await rt.store.list_receipts(session_id, status="dispatched")]
    if not uncertain:
        return
    for outcome in await probe_receipts(rt, rt.tools, session_id):
        log.info("uncertain effect probed", session_id=session_id, receipt=outcome.receipt.id,
                 tool=outcome.receipt.tool, verdict=outcome.verdict, note=outcome.note)


async def _finish(parts: ChannelParts, message: InboundMessage, handle: str) -> None:
    book = parts.book
    # The book first: a crash before the channel hears it leaves the message there, redelivered and acknowledged
    # again (step 1); the other order could leave an acknowledged message the book still calls unacknowledged.
    await anyio.to_thread.run_sync(book.advance, message.channel, message.id, "replied")
    await anyio.to_thread.run_sync(book.advance, message.channel, message.id, "acked")
    await anyio.to_thread.run_sync(parts.channel.ack, handle)


def _opens_turn_of(text: str, message: InboundMessage) -> bool:
    head = marker(message)
    return text.startswith(head + "]") or text.startswith(head + " · ")


def _started(since: list[StoredEvent], message: InboundMessage) -> bool:
    """Whether the session's log, since the message was taken in, holds the user message that starts this message's
    turn: read from the log (not the folded state, which compaction may shorten)."""
    return any(isinstance(e.event, UserMessage) and _opens_turn_of(e.event.text, message) for e in since)


def _went_on(since: list[StoredEvent]) -> bool:
    """Whether a batch was closed since the message was taken in, before its turn started: only the finishing of
    an earlier turn's parked batch does that, so an earlier attempt at this message went on with it (and may have
    died before the parked turn ended, or before its task was settled)."""
    return any(isinstance(e.event, BatchCompleted) for e in since)


def _started_at(state: SessionState, message: InboundMessage) -> int | None:
    """Index of the user message that started this message's turn in the state, where the answer is sought."""
    for i, m in enumerate(state.messages):
        if m.role == "user" and any(isinstance(b, TextBlock) and _opens_turn_of(b.text, message) for b in m.content):
            return i
    return None


def _undecided(state: SessionState) -> list[str]:
    return [c for c in state.parked if c not in state.approvals]


def _unfinished(state: SessionState) -> bool:
    return state.open_batch is not None or (state.ended is None and bool(state.messages)
                                            and state.messages[-1].role == "user")


async def _turn(parts: ChannelParts, live: LiveSession, message: InboundMessage, verdict: GateVerdict,
                task: TaskRow | None, after_seq: int) -> Reply | None:
    """The message's turn, and its reply; None when an earlier turn's open batch still waits (it parked again
    before the message's prompt could be given): nothing of the message is recorded, it stays queued."""
    state = live.loop.state
    outcome: RunOutcome | None = None
    failed: str | None = None
    if not message.text.strip() and not message.attachments:
        return _reply(message, live.id, "empty", "The message was empty; there was nothing to do.", task)
    parts.current[live.id] = (message, task)
    finishing = False  # this message's turn is finishing an earlier, parked turn first
    with anyio.move_on_after(parts.turn_budget_s) as budget:
        try:
            since = await parts.rt.store.read_events(live.id, after_seq)
            if not _started(since, message):
                # An earlier turn's batch is open (parked, then decided): finished first; parked again, the prompt
                # would not be heard: the message waits. An earlier attempt at this message that closed that batch
                # and died before the book heard how the turn ended: the turn is finished (when it had not ended)
                # or its recorded end read, and its task settled now (else it stayed `parked` for ever).
                if state.open_batch is not None or _went_on(since):
                    finishing = True
                    ended = (await live.run(None)).status if _unfinished(state) else state.ended
                    if ended == "awaiting_approval":
                        return None
                    finishing = False
                    fault_point("after_parked_turn_finished")
                    if ended is not None:
                        await _settle_parked(parts, live.id, task_status(ended))
                outcome = await live.run(prompt_of(message, verdict, task))
            elif _unfinished(state):
                outcome = await live.run(None)
        except LeaseLost:
            raise
        except StrataError as exc:
            failed = exc.message
        finally:
            parts.current.pop(live.id, None)
    if finishing and (budget.cancelled_caught or failed is not None):  # the earlier turn ended with this one
        await _settle_parked(parts, live.id, "over_budget" if budget.cancelled_caught else "failed")
    state = live.loop.state
    if budget.cancelled_caught:
        unknown = len(state.unknown_receipts)
        text = (f"This message's turn ran out of its time budget ({parts.turn_budget_s:g} s) and was stopped as "
                "Ctrl-C stops a turn: running calls were stopped and started effects are recorded as unknown"
                f" ({unknown} unknown). Session {live.id} can be inspected with `strata timeline {live.id}`.")
        return _reply(message, live.id, "over_budget", text, task)
    if failed is not None:
        return _reply(message, live.id, "failed", f"The turn failed: {failed}", task)
    if outcome is not None and outcome.status == "awaiting_approval":
        waiting = ", ".join(_undecided(state))
        child = None if waiting else await waiting_child(parts.rt.store, live.id)
        if child is not None:  # the parked call is its child's (or a session below): that one is decided
            text = (f"A call of child session {child} waits for approval: decide with `strata approve|deny {child} "
                    "CALL` (or --all); the thread goes on after that.")
        else:
            text = (f"A call waits for approval ({waiting}): decide with `strata approve|deny {live.id} CALL`; the "
                    "thread goes on after that.")
        return _reply(message, live.id, "parked", text, task)
    # no run: the message's turn had ended before the daemon died (its reply unsent), and it ended as recorded
    status = outcome.status if outcome is not None else (state.ended or "completed")
    return _reply(message, live.id, status, _answer(state.messages, _started_at(state, message)), task)


def task_status(status: str) -> str:
    """A task's status from how its turn ended (a reply's status): `done` for a completed turn."""
    return "done" if status == "completed" else status


async def _settle_parked(parts: ChannelParts, session_id: str, status: str) -> None:
    """The thread's task whose turn parked (at most one: the thread's next message waits until its calls are
    decided) ends as the turn that ran its decided calls ended: that turn is its own turn going on."""
    if await anyio.to_thread.run_sync(parts.book.settle_parked, session_id, status):
        log.info("parked task settled", session_id=session_id, status=status)


def _answer(messages: list[Message] | tuple[Message, ...], start: int | None) -> str:
    """The last text the assistant wrote in this message's turn."""
    texts = [b.text for m in messages[(start or 0):] if m.role == "assistant" for b in m.content
             if isinstance(b, TextBlock) and b.text.strip()]
    return texts[-1] if texts else "(the turn ended without a text answer)"


def _reply(message: InboundMessage, session_id: str, status: str, text: str, task: TaskRow | None) -> Reply:
    return Reply(key=message.reply_key, channel=message.channel, thread=message.thread, in_reply_to=message.id,
                 session_id=session_id, status=status, text=text, task_id=task.id if task else None)
