"""Approvals over IPC (mode `ipc`): the Approver of a hosted session (tool_executor/approval.py).

An `ask` goes to the session's driving attachment as an `approval_request` and waits for its answer, with no
timeout: nothing is ever approved by default or by waiting. When nobody drives the session, or the driver
detaches, is dropped or goes away while the call waits, the call is parked: it waits durably for `strata
approve` / `strata deny` or a driver that attaches later, exactly as with `--on-ask park`. Once a call of a run
parked, the rest of that run's asks park too (the run is about to stop as `awaiting_approval`, and an answer
given now to a later call of the batch would not be kept)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from agent.daemon._attachment import Attachment
from agent.daemon._errors import HostRefused
from agent.daemon._messages import ApprovalAsk, WaitingCall
from tool_executor import ApprovalAnswer, ApprovalRequest, Parked

NO_DRIVER = "no client was driving the session to approve it"
DRIVER_LEFT = "the driving client left while the call waited"


@dataclass
class _Waiting:
    request: ApprovalRequest
    driver: Attachment
    done: anyio.Event = field(default_factory=anyio.Event)
    answer: ApprovalAnswer | Parked | None = None
    withdrawn: bool = False  # its turn was interrupted: no answer is taken any more

    @property
    def open(self) -> bool:
        return self.answer is None and not self.withdrawn

    def settle(self, answer: ApprovalAnswer | Parked) -> None:
        if self.answer is None:
            self.answer = answer
            self.done.set()


class DriverApprover:
    def __init__(self, driver: Callable[[], Attachment | None], send: Callable[[Attachment, ApprovalAsk], bool]):
        """`driver`: the session's driving attachment now; `send`: offer it a message (False: it is gone, and
        was dropped, which parks what it was asked)."""
        self._driver = driver
        self._send = send
        self._waiting: dict[str, _Waiting] = {}
        self._parking: str | None = None

    def new_run(self) -> None:
        """A run starts: its asks go to the driver again."""
        self._parking = None

    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer | Parked:
        if self._parking is not None:
            return Parked(self._parking)
        driver = self._driver()
        if driver is None:
            return self._park(NO_DRIVER)
        waiting = _Waiting(request, driver)
        self._waiting[request.call_id] = waiting
        try:
            if not self._send(driver, ApprovalAsk.of(request)):
                waiting.settle(Parked(self._mark(DRIVER_LEFT)))
            await waiting.done.wait()
        finally:
            self._waiting.pop(request.call_id, None)
        assert waiting.answer is not None
        return waiting.answer

    def answer(self, by: Attachment, call_id: str, answer: ApprovalAnswer, *, args_sha256: str | None = None,
               plan_digest: str | None = None) -> None:
        """The driver's decision on a call it was asked about. An approval names the arguments' sha256 and the
        plan digest it was given for; a call that waits with others is refused (stale_approval), never
        approved."""
        waiting = self._waiting.get(call_id)
        if waiting is None or waiting.driver is not by or not waiting.open:
            asked = ", ".join(c for c, w in self._waiting.items() if w.driver is by and w.open) or "none"
            raise HostRefused("no_such_call", f"call {call_id} of session {by.session_id} is not waiting for this "
                              f"client's decision (waiting: {asked})", session_id=by.session_id)
        request = waiting.request
        if answer.decision != "no" and (args_sha256 != request.input_sha256 or plan_digest != request.plan_digest):
            raise HostRefused("stale_approval", f"the approval of call {call_id} names other arguments or another "
                              "tool plan than the call waits with; nothing was approved", session_id=by.session_id,
                              hint="approve with the args_sha256 and plan_digest of its approval request")
        waiting.settle(answer)

    def asked(self, by: Attachment, session_id: str, call_id: str) -> bool:
        """Whether `by` was asked about call `call_id` of session `session_id` and has not answered: a child
        session's call is asked of its parent's driver, its request naming the child (agent/delegation.py)."""
        waiting = self._waiting.get(call_id)
        return (waiting is not None and waiting.driver is by and waiting.open
                and waiting.request.session_id == session_id)

    def withdraw(self) -> None:
        """The turn was interrupted: what it asked waits for no decision any more (the loop gives each such call
        its result as it closes the batch). An answer arriving now is refused, never acknowledged and dropped."""
        for waiting in self._waiting.values():
            waiting.withdrawn = True

    def driver_left(self, driver: Attachment) -> bool:
        """Park what `driver` was asked. Whether anything was waiting for it."""
        left = [w for w in self._waiting.values() if w.driver is driver and w.open]
        for waiting in left:
            waiting.settle(Parked(self._mark(DRIVER_LEFT)))
        return bool(left)

    def park_all(self, why: str) -> None:
        """Park every call waiting now, and every ask until the next run (the host is shutting down)."""
        note = self._mark(why)
        for waiting in list(self._waiting.values()):
            waiting.settle(Parked(note))

    @property
    def parked_this_run(self) -> bool:
        """A call of the current run was parked because its driver was gone (or the host is draining)."""
        return self._parking is not None

    def waiting(self, session_id: str) -> tuple[WaitingCall, ...]:
        """What the driver of session `session_id` is asked now; a child's call names the child."""
        return tuple(WaitingCall(call_id=w.request.call_id, tool=w.request.tool, how="asking",
                                 session_id=None if w.request.session_id == session_id else w.request.session_id)
                     for w in self._waiting.values() if w.open)

    def _park(self, why: str) -> Parked:
        return Parked(self._mark(why))

    def _mark(self, why: str) -> str:
        """The parked call's note (on its timeline row); later asks of this run park with it too."""
        self._parking = f"{why}; decide it with `strata approve|deny`, or attach a driving client again"
        return self._parking
