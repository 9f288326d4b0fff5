"""`strata attach` in a terminal: `strata chat`'s look (agent/terminal/chat.py) over the daemon.

Committed events are rendered by chat's own view (Markdown, result blocks, and during a turn the live status
line, paused while an approval is asked); an approval request shows every argument and takes an explicit
y/n/a, sent back bound to the arguments' sha256 and the plan digest it was shown with (Ctrl-C or Ctrl-D there, or at
the reason of a no, denies and stops the turn, as in chat; a question whose turn ended meanwhile is closed, not left
to be answered in vain); Ctrl-C during a turn asks the daemon to interrupt it (the batch is closed as Ctrl-C
closes it in chat); /timeline and /receipts read the store; /exit, Ctrl-D or Ctrl-C at the prompt detach, and the
session goes on in the daemon. The model's text
streams as in chat (the daemon's `text_delta` pushes, through chat's view): text of a failed attempt is marked void
as chat marks it, and if the daemon dropped some deltas (this client was behind) the committed message is shown
whole after what streamed. A watching client shows what happens and takes only the slash commands."""

from __future__ import annotations

import math
import signal

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from prompt_toolkit import PromptSession
from prompt_toolkit.patch_stdout import patch_stdout
from rich.console import Console
from rich.markup import escape

from agent import ipc
from agent.cli.attach_json import ENDING_NOTICES
from agent.terminal.approver import show_request
from agent.terminal.chat import HELP, ChatView, Command
from core.events import AssistantMessage, BatchProposed, StoredEvent
from core.model import ModelAttempt
from tool_executor import ApprovalRequest

MAX_REASON = 1000
"""The longest denial reason the protocol carries (agent/ipc/_messages.py `Deny.reason`)."""
_CHOICES = {"y": "once", "yes": "once", "n": "no", "no": "no", "a": "session", "always": "session"}


def _as_request(push: ipc.ApprovalRequest) -> ApprovalRequest:
    return ApprovalRequest(session_id=push.session_id, call_id=push.call_id, tool=push.tool, input=push.input,
                           input_sha256=push.args_sha256, safety=push.safety, effect=push.effect, pii=push.pii,
                           reasons=push.reasons, asked_by=push.asked_by, plan_digest=push.plan_digest)


class _Withdrawn(Exception):
    """The turn ended while its approval question was on the screen (interrupted, or its call parked by the daemon):
    nothing waits for the answer any more."""


class TerminalAttach:
    def __init__(self, client: ipc.IpcClient, session_id: str, role: str, console: Console,
                 prompt: PromptSession[str], commands: dict[str, Command]) -> None:
        self.client = client
        self.session_id = session_id
        self.role = role
        self.console = console
        self.prompt = prompt
        self.commands = commands
        self.view = ChatView(console)
        self._in_turn = False
        self._asking = False
        """An approval question (or its reason) is being read."""
        self._withdrawn = False
        """The turn ended while this client was asked: a question still open is closed, none is asked again."""
        self._turn_items: MemoryObjectSendStream[ipc.ApprovalRequest | ipc.ResultPush | None]
        self._turn_out: MemoryObjectReceiveStream[ipc.ApprovalRequest | ipc.ResultPush | None]
        self._turn_items, self._turn_out = anyio.create_memory_object_stream(math.inf)
        self._ended: str | None = None
        self._attempt = 1
        self._streamed_chars = 0
        self._gap = False
        """Deltas of the streaming message were lost: its committed text is shown whole."""

    def say(self, text: str) -> None:
        self.console.print(text, highlight=False)

    async def run(self) -> int:
        how = "driving" if self.role == "drive" else "watching"
        self.say(f"attached to session [bold]{self.session_id}[/] ({how}). /help for commands, /exit or Ctrl-D "
                 "detaches (the session goes on in the daemon).")
        with patch_stdout(raw=True):
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._pushes, tg)
                await self._loop()
                tg.cancel_scope.cancel()
        if self._ended is not None:
            self.say(f"[yellow]{escape(self._ended)}[/]")
            return 1
        self.say(f"detached from session {self.session_id}. attach again: strata attach {self.session_id}")
        return 0

    async def _pushes(self, tg: anyio.abc.TaskGroup) -> None:
        ended = (f"the connection to the daemon ended (it stopped, or was killed); session {self.session_id} is "
                 f"kept: attach again once `strata serve` runs, or `strata resume {self.session_id}`")
        async for push in self.client.pushes():
            match push:
                case ipc.TextDelta():
                    self._delta(push)
                case ipc.EventPush():
                    if isinstance(push.event, AssistantMessage | BatchProposed):
                        self._message_committed()
                    self.view(StoredEvent(session_id=push.session_id, seq=push.seq, turn=push.turn, at=push.at,
                                          event=push.event))
                case ipc.ApprovalRequest():
                    self.view.end_line()
                    await self._turn_items.send(push)
                case ipc.ResultPush():
                    self._message_committed()
                    self.view.end_line()
                    if push.status != "completed":
                        self.say(f"[yellow]{push.status}[/]: {escape(push.reason)}")
                    if push.unknown_receipts:
                        self.say(f"{push.unknown_receipts} effect(s) with unknown outcome: strata receipts "
                                 f"{push.session_id} --status unknown")
                    for parked in push.parked:
                        self.say(f"parked: {escape(parked.tool)} call {parked.call_id} waits for "
                                 f"`strata approve|deny {push.session_id} {parked.call_id}`")
                    if self._in_turn:
                        self._withdraw_question()
                        await self._turn_items.send(push)
                case ipc.Notice():
                    ending = push.kind in ENDING_NOTICES and push.session_id == self.session_id
                    if ending and push.kind == "detached":  # this client's own detach (it may come before the
                        self.view.end_line()  # reply): nothing to show, and not an end the daemon chose
                        tg.cancel_scope.cancel()
                        return
                    self.say(f"[yellow]{escape(push.text)}[/]" if push.level == "warning" else escape(push.text))
                    if ending:
                        ended = "the daemon ended this attachment"
                        break
        self._ended = self._ended or ended
        await self._turn_items.send(None)
        tg.cancel_scope.cancel()  # the prompt may be waiting for input: nothing more will happen here

    def _delta(self, push: ipc.TextDelta) -> None:
        if push.attempt != self._attempt:  # a retry: what streamed before is void (chat's view says so)
            self.view.on_attempt(ModelAttempt(number=self._attempt, outcome="retry", duration_ms=0.0,
                                              message="the model's answer was retried"))
            self._attempt, self._streamed_chars, self._gap = push.attempt, 0, False
        if push.offset != self._streamed_chars:
            self._gap = True
        if self._gap:
            return
        self.view.on_text(push.text)
        self._streamed_chars += len(push.text)

    def _message_committed(self) -> None:
        """The streamed message is committed (or the turn ended): the next text starts a new one."""
        if self._gap:  # some deltas never came: the committed text is shown whole
            shown = self.view.streamed
            self.view.end_line()
            if shown:
                self.say("[dim](some streamed text did not reach this client; the whole message follows)[/]")
            self.view.streamed = False
        self._attempt, self._streamed_chars, self._gap = 1, 0, False

    async def _loop(self) -> None:
        while True:
            try:
                typed = await self._read()
            except (KeyboardInterrupt, EOFError):
                break
            if not isinstance(typed, str):  # asked at the prompt: a turn this client did not start
                if typed is None:
                    return
                self._in_turn = True
                try:
                    if not await self._turn(typed):
                        return
                finally:
                    self._in_turn = False
                continue
            text = typed.strip()
            if not text:
                continue
            if text.startswith("/"):
                name, _, arg = text.partition(" ")
                if name in ("/exit", "/quit", "/detach"):
                    break
                if name == "/help":
                    self.console.print(HELP.replace("leave (Ctrl-D does too); the session can be resumed later",
                                                    "detach (Ctrl-D does too); the session goes on in the daemon"),
                                       markup=False, highlight=False)
                elif name in self.commands:
                    await self.commands[name](arg.strip())
                else:
                    self.say(f"unknown command {escape(name)}; /help lists them")
                continue
            if not await self._request(ipc.Prompt, text=text):
                continue
            self._in_turn = True
            try:
                if not await self._turn():
                    return
            finally:
                self._in_turn = False
        await self._request(ipc.Detach)

    async def _read(self) -> str | ipc.ApprovalRequest | None:
        """The next line typed at `strata>`; or, if the daemon asks this driver first, its approval request (the
        prompt is closed for it): a turn this client did not start, such as a parked call asked again when this
        driver attached. None: the attachment ended."""
        asked: list[ipc.ApprovalRequest | None] = []
        running = anyio.Event()

        async def watch() -> None:
            item = await self._turn_out.receive()
            assert not isinstance(item, ipc.ResultPush)  # results reach _turn_items only within a turn
            asked.append(item)
            await running.wait()  # the prompt may still be starting: close it once it runs
            if not self.prompt.app.is_done:
                self.prompt.app.exit(result="")

        left: KeyboardInterrupt | EOFError | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            try:
                text = await self.prompt.prompt_async("strata> ", handle_sigint=False, pre_run=running.set)
            except (KeyboardInterrupt, EOFError) as exc:  # Ctrl-C, Ctrl-D: raised out of the task group they
                left = exc  # would reach the caller wrapped in an exception group, which it does not catch
            tg.cancel_scope.cancel()
        if left is not None:
            raise left
        if not asked:
            return text
        if text.strip():
            self.say("[yellow]not sent[/]: answer the approval first")
        return asked[0]

    async def _turn(self, first: ipc.ApprovalRequest | None = None) -> bool:
        """Until the turn's result: answer the approvals it asks (`first`: one that arrived already). False when
        the attachment ended."""
        self.view.begin_turn()  # the live area (status line) only while no prompt is on the screen
        self._withdrawn = False
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._interrupt_on_sigint)
            tg.start_soon(self.view.area.animate)
            try:
                if first is not None:
                    await self._approve(first)
                async for item in self._turn_out:
                    if item is None:
                        return False
                    if isinstance(item, ipc.ResultPush):
                        return True
                    await self._approve(item)
            finally:
                tg.cancel_scope.cancel()
                self.view.end_turn()
        return False

    async def _interrupt_on_sigint(self) -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                self.say("[yellow]interrupting the turn[/] (running calls are stopped; started effects are "
                         "recorded as unknown)")
                await self._request(ipc.Interrupt)

    async def _approve(self, asked: ipc.ApprovalRequest) -> None:
        with self.view.area.paused():
            await self._decide(asked)

    def _withdraw_question(self) -> None:
        """The turn's result came: an approval question still open is answered by nobody (the daemon withdrew it)."""
        self._withdrawn = True
        self._exit_if_withdrawn()

    def _exit_if_withdrawn(self) -> None:
        app = self.prompt.app
        if self._withdrawn and self._asking and app.is_running and not app.is_done:
            app.exit(exception=_Withdrawn())

    async def _ask(self, question: str) -> str:
        """A line read for an approval; _Withdrawn once the turn ended (before the question or while it is open)."""
        if self._withdrawn:
            raise _Withdrawn()
        self._asking = True
        try:  # pre_run: a result that came after the check above but before the prompt ran closes it too
            return await self.prompt.prompt_async(question, handle_sigint=False, pre_run=self._exit_if_withdrawn)
        finally:
            self._asking = False

    async def _decide(self, asked: ipc.ApprovalRequest) -> None:
        try:
            await self._decide_or_withdrawn(asked)
        except _Withdrawn:
            self._turn_over()
            self.say(f"[yellow]not answered[/]: the turn ended while call {escape(asked.call_id)} was asked; nothing "
                     "waits for this answer")

    async def _decide_or_withdrawn(self, asked: ipc.ApprovalRequest) -> None:
        show_request(self.console, _as_request(asked))
        while True:
            try:
                raw = await self._ask("approve? [y/n/a] ")
            except (KeyboardInterrupt, EOFError):  # denied, and the turn stopped with it (one request: nothing
                await self._deny(asked, reason="the person interrupted the approval prompt",  # runs in between)
                                 interrupt=True)
                return
            choice = _CHOICES.get(raw.strip().lower())
            if choice is not None:
                break
            self.say("  answer y, n or a (Enter alone is not an answer)")
        if choice == "no":
            interrupt = False
            try:
                reason = (await self._ask("reason for the model (optional): ")).strip()
            except (KeyboardInterrupt, EOFError):  # the "no" stands, without a reason; the turn stops (as in chat)
                reason, interrupt = "", True
            if len(reason) > MAX_REASON:  # the protocol's bound: a longer one would be refused, the call left waiting
                reason = reason[:MAX_REASON]
                self.say(f"  [yellow]the reason was cut to {MAX_REASON} characters[/]")
            await self._deny(asked, reason=reason, interrupt=interrupt)
            return
        await self._request(ipc.Approve, call_id=asked.call_id, args_sha256=asked.args_sha256,
                            plan_digest=asked.plan_digest, scope=choice)

    async def _deny(self, asked: ipc.ApprovalRequest, *, reason: str, interrupt: bool) -> None:
        if await self._request(ipc.Deny, call_id=asked.call_id, reason=reason, interrupt=interrupt) and interrupt:
            self._turn_over()

    def _turn_over(self) -> None:
        """The turn is stopped or ended while a question was on the screen: its status line is not drawn again when
        the question goes, whatever of its last events (a denied call's result: "thinking" in chat's view) comes
        before the turn's end (whose `begin_turn` for the next turn enables the area again)."""
        self.view.area.enabled = False
        self.view.area.status(None)

    async def _request(self, kind: type[ipc.SessionRequest], **fields: object) -> bool:
        try:
            await self.client.request(kind, session_id=self.session_id, **fields)
        except ipc.RequestFailed as exc:
            self.say(f"[red]refused[/]: {escape(exc.message)}")
            return False
        except ipc.DaemonGone as exc:
            self._ended = exc.message
            return False
        return True
