"""The channels' pollers inside the serve daemon: one poller a channel, one worker a thread.

A poller takes messages only from its own channel (its `threads` globs filter what it may take), oldest first,
and hands each to its thread's worker; a thread's messages are handled in arrival order, one at a time, while
different threads run side by side, at most `daemon.max_workers` at once across the daemon's channels (the others
wait for a place in arrival order; a thread with more messages gives its place up after each while others wait).
A message a worker could not handle yet (its session is driven elsewhere, or waits for approval) stays in the
channel and is offered again after `DEFERRED_RETRY_S`, ahead of the thread's later ones; meanwhile the thread's
files are left out of the polls unread (read once a retry, not five times a second).

A message id belongs to the first message read with it, from that poll on: while that message waits (queued, or put
off with its thread), another thread's message reusing the id is rejected at once with the reason (the book keeps
the id's thread for good once the message is taken in; the inbox, read oldest first, gives the same first message
after a restart). A thread with nothing queued, running, put off or waiting for its retry is forgotten by the
poller (its session stays bound to it in the book, where a later message finds it), so the poller holds only the
threads with work, however many it has seen.

A thread's worker first claims the thread in the book (memory/channel_book/): of several daemons working on one
PostgreSQL database, one at a time drives a thread; the others leave its messages where they are. The claim is a
lease (renewed while the worker runs, released when its queue is empty), taken over from a daemon that died: at
once on the same machine (its pid is gone), at the claim's expiry from another.

`drain(grace_s)`: the pollers stop taking messages, running turns get the grace period, then they are closed
as Ctrl-C closes them; whatever was not acknowledged is handled again by the next daemon, exactly once."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import anyio
import structlog
from anyio.abc import TaskGroup

from agent.channels._messages import InboundMessage
from agent.channels._reply_tool import Current, reply_tool
from agent.channels._retention import PRUNE_INTERVAL_S, Prune, every, prune_files
from agent.channels._spool import SpoolChannel
from agent.channels._turns import ChannelParts, daemon_runtime, handle, reject_taken
from agent.channels._webhook import WebhookChannel
from agent.models import close_model
from agent.session import Runtime
from config import ChannelEntry, LoadedConfig
from config.channels import DEFAULT_KEEP_IDS_DAYS
from core.clock import SystemClock
from core.env_block import take_secret
from core.errors import ConfigError, StoreError
from core.model import ModelAdapter
from memory.channel_book import ChannelBook
from memory.leases import LEASE_TTL, make_liveness, new_holder

log = structlog.get_logger("strata.channels")

POLL_INTERVAL_S = 0.2


DEFERRED_RETRY_S = 2.0
"""A thread whose message could not be handled (its session waits for approval, or is driven elsewhere) is offered
its messages again no sooner than this."""


@dataclass
class _Thread:
    queue: deque[tuple[InboundMessage, str]] = field(default_factory=deque)
    running: bool = False
    not_before: float = 0.0
    held: set[str] = field(default_factory=set)
    """Handles of this thread's messages read while it waits for `not_before`: left out of the polls (unread) until
    then, so a waiting thread's files are read once a retry, not on every poll."""


class _Poller:
    def __init__(self, parts: ChannelParts, tg: TaskGroup, interval: float, token: str,
                 places: anyio.Semaphore) -> None:
        self.parts = parts
        self._places = places
        """The daemon's worker places (`daemon.max_workers`, shared by its channels): taken first come, first
        served, so however many threads have messages, only so many run (each a session, its connections and
        worker threads) and the rest wait as plain queued tasks."""
        self._token = token
        self._clock = SystemClock()
        self._alive = make_liveness(self._clock)
        self._tg = tg
        self._interval = interval
        self._threads: dict[str, _Thread] = {}
        """Threads with work: something queued, running, held, or a retry not yet due (idle ones are forgotten)."""
        self._queued: set[str] = set()
        self._finished: set[str] = set()
        """Handles whose message was handled (and acknowledged) since the current poll began: a poll that read
        one before it was acknowledged does not queue it again."""
        self._ids: dict[str, tuple[str, set[str]]] = {}
        """Message ids read and not yet handled, each with its thread and the handles holding it (queued, or held
        while their thread waits): another thread's message reusing one is rejected when read."""
        self._id_of: dict[str, str] = {}
        """The message id each handle in `_ids` holds."""
        self._let_go: set[str] = set()
        """Held handles let go for their retry's poll: those it does not find are gone (their ids are let go)."""
        self._holding: set[str] = set()
        """Threads with held handles."""
        self.stopping = False

    @property
    def busy(self) -> bool:
        return any(t.running for t in self._threads.values())

    async def run(self) -> None:
        channel = self.parts.channel
        failing: str | None = None  # why the last poll failed, while polls fail
        while not self.stopping:
            self._finished.clear()
            try:
                found = await anyio.to_thread.run_sync(channel.poll, self._skip())
            except Exception as exc:  # a folder gone or unreadable, or a bug: logged, polled again, never fatal
                failure = f"{type(exc).__name__}: {exc}"
                if failure != failing:  # once, not every poll (5 a second) while it lasts
                    log.error("channel cannot be polled", channel=channel.name, error_type=type(exc).__name__,
                              reason=str(exc))
                    failing = failure
                found = []
            else:
                if failing is not None:
                    log.info("channel polled again", channel=channel.name)
                    failing = None
                self._forget_gone({handle_ for _, handle_ in found})
            for message, handle_ in found:
                if handle_ in self._queued or handle_ in self._finished or self.stopping:
                    continue
                owner = self._ids.get(message.id)
                if owner is not None and owner[0] != message.thread:  # read first, the other message keeps the id
                    await self._reject(message, handle_, owner[0])  # however long its thread waits
                    continue
                self._take_id(message, handle_)
                thread = self._threads.setdefault(message.thread, _Thread())
                if thread.not_before > anyio.current_time():  # waits: not read again before its retry
                    thread.held.add(handle_)
                    self._holding.add(message.thread)
                    continue
                self._queued.add(handle_)
                thread.queue.append((message, handle_))
                if not thread.running:
                    thread.running = True
                    self._tg.start_soon(self._work, message.thread, thread)
            self._forget_idle()
            await anyio.sleep(self._interval)

    async def _reject(self, message: InboundMessage, handle_: str, owner: str) -> None:
        try:
            await reject_taken(self.parts, message, handle_, owner)
        except Exception as exc:  # the file stays in the inbox: offered (and rejected) again at a later poll
            log.error("message could not be rejected", channel=message.channel, message_id=message.id,
                      error_type=type(exc).__name__, reason=str(exc))

    def _take_id(self, message: InboundMessage, handle_: str) -> None:
        """The message's id held for its thread from now until the message is handled (or its file is gone)."""
        if self._id_of.get(handle_, message.id) != message.id:  # the file was replaced by another message
            self._let_go_of(handle_)
        _, handles = self._ids.setdefault(message.id, (message.thread, set()))
        handles.add(handle_)
        self._id_of[handle_] = message.id

    def _let_go_of(self, handle_: str) -> None:
        message_id = self._id_of.pop(handle_, None)
        if message_id is None:
            return
        _, handles = self._ids[message_id]
        handles.discard(handle_)
        if not handles:
            del self._ids[message_id]

    def _forget_gone(self, found: set[str]) -> None:
        """Held handles let go for this poll that it did not find: their files are gone, so are their ids' holds."""
        for handle_ in self._let_go - found - self._queued:
            self._let_go_of(handle_)
        self._let_go.clear()

    def _forget_idle(self) -> None:
        """Threads with nothing queued, running, held or waiting for a retry are dropped from memory: the book binds
        each thread to its session for good, so a later message of it is handled in the same session."""
        now = anyio.current_time()
        idle = [name for name, t in self._threads.items()
                if not t.running and not t.queue and not t.held and t.not_before <= now and name not in self._holding]
        for name in idle:
            del self._threads[name]

    @property
    def threads_in_memory(self) -> int:
        return len(self._threads)

    async def _work(self, name: str, thread: _Thread) -> None:
        """Drive one thread: wait for a worker's place (in arrival order), claim the thread, handle its queue. A
        thread with more messages gives its place up after each one while other threads wait, and queues again."""
        try:
            await self._work_once(name, thread)
        except BaseException:
            thread.running = False
            raise
        # More queued: it gave its place up for waiting threads, or a poll queued a message while this worker was
        # leaving (letting the claim go, a write that waits while the book is busy): to the back of the line, still
        # `running`, so that nothing queued is left without a worker. (Put off, the queue is empty: held instead.)
        if thread.queue and not self.stopping:
            self._tg.start_soon(self._work, name, thread)
        else:
            thread.running = False

    async def _work_once(self, name: str, thread: _Thread) -> None:
        book, channel = self.parts.book, self.parts.channel.name
        async with self._places:
            if self.stopping:
                return
            holder = new_holder(self._token, self._clock)
            try:
                claimed = await anyio.to_thread.run_sync(book.claim, channel, name, holder, self._alive)
            except StoreError as exc:
                log.error("thread cannot be claimed", channel=channel, thread=name, reason=exc.message)
                claimed = False
            if not claimed:  # another daemon drives this thread now: its messages are left to it
                self._defer(thread)
                return
            try:
                async with anyio.create_task_group() as renewing:
                    renewing.start_soon(self._renew, name)
                    await self._drain(thread)
                    renewing.cancel_scope.cancel()
            finally:
                with anyio.CancelScope(shield=True), contextlib.suppress(StoreError):
                    await anyio.to_thread.run_sync(book.release_claim, channel, name, self._token)

    async def _drain(self, thread: _Thread) -> bool:
        """Handle the thread's queue in order; True when it stopped early to let waiting threads go first."""
        while thread.queue and not self.stopping:
            message, handle_ = thread.queue[0]
            try:
                outcome = await handle(self.parts, message, handle_)
            except Exception as exc:  # a bug or an unusable store: this message waits, the daemon goes on
                log.error("message could not be handled", channel=message.channel, message_id=message.id,
                          error_type=type(exc).__name__, exc_info=True)
                outcome = "deferred"
            if outcome == "deferred":  # offered again at a later poll, still first of its thread
                self._defer(thread)
                return False
            thread.queue.popleft()
            self._unqueue(message, handle_)
            self._finished.add(handle_)
            if thread.queue and self._places.statistics().tasks_waiting:
                return True
        return False

    async def _renew(self, name: str) -> None:
        book, channel = self.parts.book, self.parts.channel.name
        while True:
            await anyio.sleep(LEASE_TTL.total_seconds() / 3)
            try:
                held = await anyio.to_thread.run_sync(book.renew_claim, channel, name, self._token,
                                                      self._clock.now() + LEASE_TTL)
            except StoreError as exc:
                log.error("thread's claim cannot be renewed", channel=channel, thread=name, reason=exc.message)
                continue
            if not held:  # taken over (this daemon was thought dead): the session's own lease still guards it
                log.warning("thread's claim was taken over by another daemon", channel=channel, thread=name)
                return

    def _skip(self) -> frozenset[str]:
        """The handles a poll leaves unread: those queued, and those of threads waiting for their retry (a thread
        whose retry is due has its handles let go, read at this poll)."""
        now = anyio.current_time()
        skip = set(self._queued)
        for name in list(self._holding):
            thread = self._threads[name]
            if thread.not_before <= now:
                self._let_go |= thread.held
                thread.held.clear()
                self._holding.discard(name)
            else:
                skip |= thread.held
        return frozenset(skip)

    def _defer(self, thread: _Thread) -> None:
        thread.not_before = anyio.current_time() + DEFERRED_RETRY_S
        if thread.queue:
            thread.held.update(handle_ for _, handle_ in thread.queue)
            self._holding.add(thread.queue[0][0].thread)
        self._forget(thread)

    def _forget(self, thread: _Thread) -> None:
        """The thread's queue put off: its handles held (their ids still theirs), offered again at the retry."""
        for _, handle_ in thread.queue:
            self._queued.discard(handle_)
        thread.queue.clear()

    def _unqueue(self, message: InboundMessage, handle_: str) -> None:
        """A message handled (processed, acknowledged again, or rejected): its handle and its hold on the id go."""
        self._queued.discard(handle_)
        self._let_go_of(handle_)


def open_channel(entry: ChannelEntry, home: Path, env: Mapping[str, str]) -> SpoolChannel:
    """The channel `entry` configures (its folders created; a webhook is a spool in the home behind an HTTP
    endpoint). A webhook's token must be in the environment."""
    if entry.kind == "spool":
        assert entry.inbox is not None and entry.outbox is not None
        return SpoolChannel(entry.name, Path(entry.inbox).expanduser(), Path(entry.outbox).expanduser(),
                            tuple(entry.threads))
    assert entry.port is not None and entry.token_env is not None
    token = env.get(entry.token_env, "")
    if len(token) < 16:
        raise ConfigError(f"the environment variable {entry.token_env} must hold the webhook's bearer token (16 "
                          "characters or more)", key=f"channels.{entry.name}.token_env")
    return WebhookChannel(entry.name, home / "channels" / entry.name, port=entry.port, token=token,
                          max_body_bytes=entry.max_body_bytes, threads=tuple(entry.threads),
                          callback_url=entry.callback_url,
                          keep_ids_days=entry.keep_ids_days or DEFAULT_KEEP_IDS_DAYS)


def _prunes(channel: SpoolChannel, entry: ChannelEntry, book: ChannelBook, rt: Runtime) -> list[Prune]:
    """What the channel's folders keep (agent/channels/_retention.py): a webhook's `ids/` first, then the replies
    (a webhook's wait for their id's record to go) and the rejected files."""
    keep: dict[str, object] = {"keep_replies_days": entry.keep_replies_days,
                               "keep_rejected_days": entry.keep_rejected_days}
    files = partial(prune_files, channel, book, rt.store, keep_replies_days=entry.keep_replies_days,
                    keep_rejected_days=entry.keep_rejected_days)
    prunes: list[Prune] = [("channel files", files, keep)]
    if isinstance(channel, WebhookChannel):
        webhook = channel

        async def ids() -> dict[str, int]:
            return {"removed": await anyio.to_thread.run_sync(webhook.prune_ids)}

        prunes.insert(0, ("message id records", ids, {"keep_ids_days": webhook.keep_ids_days}))
    return prunes


class ChannelRunner:
    def __init__(self, pollers: list[_Poller], book: ChannelBook) -> None:
        self._pollers = pollers
        self.book = book

    @classmethod
    @asynccontextmanager
    async def open(cls, rt: Runtime, loaded: LoadedConfig, *, model_factory: Callable[[str], ModelAdapter],
                   workspace_config: Callable[[Path], LoadedConfig] | None = None,
                   interval: float = POLL_INTERVAL_S) -> AsyncIterator[ChannelRunner]:
        """Start a poller for every configured channel; leaving the block stops them (after `drain`)."""
        config = loaded.channels
        settings = loaded.settings
        book = await anyio.to_thread.run_sync(partial(ChannelBook.open_for, settings))
        assert book is not None  # opened for writing: created when missing
        token = uuid.uuid4().hex  # this daemon's claims
        try:
            async with anyio.create_task_group() as tg:
                pollers: list[_Poller] = []
                places = anyio.Semaphore(config.max_workers)
                for entry in config.channels:
                    workspace = await anyio.Path(entry.workspace).expanduser()
                    if not await workspace.is_dir():
                        raise ConfigError(f"the workspace {workspace} is not a directory",
                                          key=f"channels.{entry.name}.workspace")
                    channel = await anyio.to_thread.run_sync(open_channel, entry, settings.home, os.environ)
                    if isinstance(channel, WebhookChannel):
                        try:
                            await tg.start(channel.serve)
                        except OSError as exc:
                            raise ConfigError(f"port {channel.port} cannot be listened on: {exc.strerror}",
                                              key=f"channels.{entry.name}.port") from None
                        tg.start_soon(channel.deliver)
                    base = rt
                    if workspace_config is not None:
                        project = await anyio.to_thread.run_sync(workspace_config, Path(workspace))
                        base = await anyio.to_thread.run_sync(rt.for_config, project)
                    spec = entry.model or settings.model
                    if not spec:
                        raise ConfigError("no model for the channel's sessions", key=f"channels.{entry.name}.model",
                                          hint="set `model` in the channel's table or in the config")
                    await close_model(model_factory(spec))  # a bad spec is an error now, not at the first message
                    current: Current = {}
                    drt = daemon_runtime(base, config.enable, reply_tool(channel, book, current), entry.name)
                    parts = ChannelParts(rt=drt, book=book, channel=channel, entry=entry,
                                         model=partial(model_factory, spec), max_turns=settings.max_turns,
                                         turn_budget_s=config.turn_budget_s, current=current)
                    pollers.append(_Poller(parts, tg, interval, token, places))
                    tg.start_soon(every, PRUNE_INTERVAL_S, entry.name, _prunes(channel, entry, book, drt))
                for entry in config.channels:  # each webhook holds its token now: no command the sessions run
                    if entry.token_env is not None:  # (`bash`, a hook) inherits it, nor is it shown in /proc
                        take_secret(entry.token_env)  # kept for the sessions' maskers (core/env_block.py)
                for poller in pollers:
                    tg.start_soon(poller.run)
                    log.info("channel polling", channel=poller.parts.channel.name, kind=poller.parts.entry.kind)
                runner = cls(pollers, book)
                try:
                    yield runner
                finally:
                    for poller in pollers:
                        poller.stopping = True
                    tg.cancel_scope.cancel()
        finally:
            await anyio.to_thread.run_sync(book.close)

    @property
    def threads_in_memory(self) -> int:
        """Threads the pollers hold now (those with work): not one for every thread ever seen."""
        return sum(p.threads_in_memory for p in self._pollers)

    async def drain(self, grace_s: float) -> None:
        """Take no more messages; let running turns finish within `grace_s` (the block's end closes the rest)."""
        for poller in self._pollers:
            poller.stopping = True
        with anyio.move_on_after(grace_s):
            while any(p.busy for p in self._pollers):  # noqa: ASYNC110 - workers end on their own schedule
                await anyio.sleep(0.05)
