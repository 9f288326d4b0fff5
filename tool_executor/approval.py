"""Step 7: approval, in one place. When policy or a hook asks, the call needs a decision by a person; the model
can never approve. In order:

1. a person's recorded "no" to this very call stands, whatever was granted since;
2. a session grant ("always for this session") for this tool and the same asking rule or hook approves it;
3. a decision recorded for this call (`strata approve` / `strata deny` on a parked session) applies only if it
   was made for the same argument sha256 and plan digest; a changed call needs a new decision;
4. with no person to ask (headless, daemon, mcp) the call is denied, or parked with `--on-ask park`;
5. otherwise the session's Approver asks: yes, no, or always for this session; or it parks the call when the
   person it would ask is gone (the serve daemon's driving client detached).

`recorded_decision` builds what `strata approve` / `strata deny` commit for a parked call (agent/parked_decisions.py
takes the lease and commits it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, Protocol

import anyio

from core.events import ApprovalGranted, ApprovalRejected, Event, GrantAdded, ParkedCall, PlannedCall
from core.hashing import sha256_json
from core.record import record
from core.state import Approval, Grant
from core.timeline_rows import ApprovalRow
from core.utf8 import valid_text
from core.vocabulary import OnAsk
from tool_executor._pre_hooks import Hooked, merge_asks
from tool_executor._types import CallEnv, Decision, Step, effective_sha256
from tool_executor.verdicts import Ask, Deny, Parked, Pass


@record
class ApprovalRequest:
    """Everything a person needs to decide: the full call and why it is asked."""

    session_id: str
    call_id: str
    tool: str
    input: Mapping[str, Any]
    input_sha256: str
    safety: str
    effect: str
    pii: str
    reasons: tuple[str, ...]
    asked_by: str
    plan_digest: str
    narrower: str | None = None
    """A narrower "always" to offer first: an allow pattern this call matches (`git *`, core/grant_scope.py)."""


@record
class ApprovalAnswer:
    """A person's answer to an approval request."""

    decision: Literal["yes", "no", "always"]
    approver: str
    """Who decided (e.g. `person:alice@host (/dev/pts/3)`); recorded with the decision."""
    reason: str = ""
    pattern: str | None = None
    """With "always": only calls matching the request's `narrower` pattern (any other pattern is ignored)."""


Covers = Callable[[str], bool]
"""Whether the call being decided matches an allow pattern (a pattern grant's)."""


class Approver(Protocol):
    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer | Parked:
        """A person's answer, or `Parked` when the person who would answer is gone (a daemon's client detached):
        the call then waits durably for `strata approve` / `strata deny`, exactly as with `--on-ask park`."""
        ...


@record
class Approved:
    """An `ask` answered yes: by whom, and how (a grant, a recorded decision, or asked now)."""

    approver: str
    via: Literal["grant", "recorded", "asked"]
    answer: ApprovalAnswer | None = None


@record
class Rejected:
    """An `ask` answered no: by whom, why, and how."""

    approver: str
    reason: str
    via: Literal["recorded", "asked", "no_human"]
    answer: ApprovalAnswer | None = None


ApprovalOutcome = Approved | Rejected | Parked


def from_record(request: ApprovalRequest, grants: Sequence[Grant], recorded: Approval | None,
                covers: Covers | None = None) -> tuple[ApprovalOutcome | None, str]:
    """Steps 1 and 2: an outcome decided without asking anyone, or None and a note on why a record did not
    apply. A grant with a pattern covers the call only where `covers` says the call matches it."""
    # A person's "no" to this very call stands, whatever grant ("always") was given for its tool since.
    if recorded is not None and recorded.decision == "rejected":
        return Rejected(recorded.approver, recorded.reason, "recorded"), ""
    # An ask may be the union of several askers ("rule A + hook B"): grants must cover every one of them.
    askers = request.asked_by.split(" + ")
    grants = [g for g in grants if g.pattern is None or (covers is not None and covers(g.pattern))]
    covering = [next((g for g in grants if g.tool == request.tool and g.asked_by in (a, request.asked_by)), None)
                for a in askers]
    if all(g is not None for g in covering):
        approvers = sorted({g.approver for g in covering if g is not None})
        return Approved(", ".join(approvers), "grant"), ""
    if recorded is None:
        return None, ""
    if recorded.args_sha256 != request.input_sha256:
        return None, (f"a decision by {recorded.approver} was recorded for different arguments; the call changed, "
                      "so it needs a new decision")
    if recorded.plan_digest != request.plan_digest:
        return None, (f"an approval by {recorded.approver} was given under a different tool plan; it needs a new "
                      "decision")
    return Approved(recorded.approver, "recorded"), ""


def no_human(ask: Ask, tool: str, mode: str) -> Deny:
    """`ask` with no person to ask and no parking is a denial that says how to get the call through."""
    if ask.check == "hook":  # an allow rule cannot answer a hook's question
        how = "run with --on-ask park and approve it with `strata approve`, or in `strata chat`"
    else:
        how = (f"allow it with --allow {tool} or a policy rule, or run with --on-ask park and approve it with "
               "`strata approve`")
    return Deny(ask.check, (*ask.reasons, f"there is no person to approve it in {mode} mode: {how}"))


class ApprovalStep:
    """Step 7 for the calls of one processor: who asks (`approver`, or nobody and then `on_ask`), one question
    at a time, and the "always" answers given during the current batch (for its later calls)."""

    def __init__(self, approver: Approver | None, on_ask: OnAsk,
                 matches: Callable[[str, Mapping[str, Any], str], bool] | None = None,
                 narrower: Callable[[str, Mapping[str, Any]], str | None] | None = None) -> None:
        self.approver = approver
        self.on_ask = on_ask
        self.matches = matches
        """Whether a call (tool, arguments) matches an allow pattern: how a pattern grant is judged."""
        self.narrower = narrower
        """The narrower "always" pattern to offer for a call, if any."""
        self._asking = anyio.Lock()
        self.batch_grants: list[Grant] = []
        self.before_asking: Callable[[], Awaitable[None]] | None = None
        """Run before a person is asked (the executor commits what the batch's earlier calls left staged: an
        answer may take hours, and a crash meanwhile must not lose what already ran)."""

    @property
    def nobody_to_ask(self) -> bool:
        return self.approver is None and self.on_ask == "deny"

    def unanswered(self, ask: Ask, call_id: str, tool: str, args: Mapping[str, Any], env: CallEnv | None,
                   mode: str) -> Deny | None:
        """With no person to ask and no parking, an `ask` is a denial, unless a grant or a decision recorded for
        this very call (`env`) answers it. None: it can be answered."""
        if not self.nobody_to_ask:
            return None
        if env is not None:
            request = ApprovalRequest(session_id=env.session_id, call_id=call_id, tool=tool, input=args,
                                      input_sha256=sha256_json(args), safety="", effect="", pii="",
                                      reasons=ask.reasons, asked_by=ask.asked_by, plan_digest=env.plan_digest)
            outcome, _ = from_record(request, env.grants, env.approvals.get(call_id), self._covers(tool, args))
            if outcome is not None:
                return None
        return no_human(ask, tool, mode)

    def _covers(self, tool: str, args: Mapping[str, Any]) -> Covers | None:
        matches = self.matches
        return None if matches is None else (lambda pattern: matches(tool, args, pattern))

    async def decide(self, call: PlannedCall, env: CallEnv, hooked: Hooked, steps: list[Step]) -> Decision:
        """Where steps 1-7 end for a call the hooks let through (`hooked`)."""
        tool, args, spec = hooked.tool, hooked.input, hooked.spec
        ask = hooked.verdict if isinstance(hooked.verdict, Ask) else None
        allowed = hooked.verdict if isinstance(hooked.verdict, Pass) else Pass()

        def done(verdict: Pass | Deny | Parked, **kw: Any) -> Decision:
            return Decision(verdict, spec, tool, args, effective_sha256(call, args), tuple(steps), **kw)

        if hooked.hook_ask is not None:
            deny = self.unanswered(hooked.hook_ask, call.call_id, tool, args, env, env.mode)
            if deny is not None:
                steps.append(Step("approval", "deny", f"no person to ask in {env.mode} mode", by=env.mode))
                return done(no_human(hooked.hook_ask, tool, env.mode))
            ask = merge_asks(ask, hooked.hook_ask)
        if ask is None:
            rejected = env.approvals.get(call.call_id)
            if rejected is not None and rejected.decision == "rejected":
                # A person said no to this very call (`strata deny`): a rule added since does not overrule them.
                steps.append(Step("approval", "rejected", f"{rejected.approver} (recorded)", by=rejected.approver))
                why = f": {rejected.reason}" if rejected.reason else ""
                return done(Deny("approval", (f"rejected by {rejected.approver}{why}",)), approver=rejected.approver)
            return done(allowed)
        return await self._ask(call, env, hooked, ask, steps)

    async def _ask(self, call: PlannedCall, env: CallEnv, hooked: Hooked, ask: Ask, steps: list[Step]) -> Decision:
        tool, args, spec = hooked.tool, hooked.input, hooked.spec
        assert spec is not None
        sha = effective_sha256(call, args)
        request = ApprovalRequest(session_id=env.session_id, call_id=call.call_id, tool=tool, input=args,
                                  input_sha256=sha, safety=spec.safety, effect=spec.effect, pii=spec.pii,
                                  reasons=ask.reasons, asked_by=ask.asked_by, plan_digest=env.plan_digest,
                                  narrower=self.narrower(tool, args) if self.narrower is not None else None)
        outcome: ApprovalOutcome | None
        outcome, note = from_record(request, (*env.grants, *self.batch_grants), env.approvals.get(call.call_id),
                                    self._covers(tool, args))
        events: list[Event] = []

        def done(verdict: Pass | Deny | Parked, approver: str | None = None) -> Decision:
            return Decision(verdict, spec, tool, args, sha, tuple(steps), tuple(events), approver=approver, ask=ask)

        if outcome is None and self.approver is None:
            if self.on_ask == "deny":  # a record answered it earlier in the path but not for these arguments
                steps.append(Step("approval", "deny", note or f"no person to ask in {env.mode} mode", by=env.mode))
                return done(no_human(Ask(ask.check, ask.asked_by, (*ask.reasons, *((note,) if note else ()))),
                                     tool, env.mode))
            outcome = Parked(note)
        if outcome is None:
            assert self.approver is not None
            async with self._asking:  # one question at a time, even for calls running side by side
                if self.before_asking is not None:
                    await self.before_asking()
                answer = await self.approver.ask(request)
            if isinstance(answer, Parked):  # the person to ask is gone: the call waits for a recorded decision
                outcome = answer
            elif answer.decision == "no":
                reason = valid_text(answer.reason)  # typed at a terminal that may send bytes that are not UTF-8
                outcome = Rejected(answer.approver, reason, "asked", answer)
                events.append(ApprovalRejected(call_id=call.call_id, tool=tool, args_sha256=sha,
                                               approver=answer.approver, reason=reason))
            else:
                outcome = Approved(answer.approver, "asked", answer)
                events.append(ApprovalGranted(call_id=call.call_id, tool=tool, args_sha256=sha,
                                              plan_digest=env.plan_digest, approver=answer.approver,
                                              scope="session" if answer.decision == "always" else "once",
                                              asked_by=ask.asked_by))
                if answer.decision == "always":
                    pattern = answer.pattern if answer.pattern == request.narrower else None
                    events.append(GrantAdded(tool=tool, asked_by=ask.asked_by, approver=answer.approver,
                                             call_id=call.call_id, pattern=pattern))
                    self.batch_grants.append(Grant(tool, ask.asked_by, answer.approver, pattern))
        match outcome:
            case Approved():
                steps.append(Step("approval", "approved", f"{outcome.approver} ({outcome.via})", by=outcome.approver))
                return done(Pass(rule=f"approved by {outcome.approver}"), outcome.approver)
            case Rejected():
                steps.append(Step("approval", "rejected", f"{outcome.approver} ({outcome.via})", by=outcome.approver))
                why = f": {outcome.reason}" if outcome.reason else ""
                return done(Deny("approval", (*ask.reasons, f"rejected by {outcome.approver}{why}")),
                            outcome.approver)
            case Parked():
                steps.append(Step("approval", "parked", outcome.note or note or "waiting for `strata approve`",
                                  by=ask.asked_by))
                return done(outcome)


def parked_call(call: PlannedCall, decision: Decision, env: CallEnv) -> ParkedCall:
    """What a parked call waits with: the call as the pipeline left it, bound to its arguments and plan."""
    assert decision.ask is not None
    return ParkedCall(call_id=call.call_id, tool=decision.tool, input=dict(decision.input),
                      input_sha256=decision.input_sha256, plan_digest=env.plan_digest,
                      reasons=decision.ask.reasons, asked_by=decision.ask.asked_by)


def recorded_decision(parked: ParkedCall, *, approve: bool, approver: str, reason: str, turn: int,
                      mask: Callable[[str], str]) -> tuple[ApprovalGranted | ApprovalRejected, ApprovalRow]:
    """What `strata approve` / `strata deny` commit for a parked call: the decision, bound to the argument
    sha256 and plan digest the call was parked with, and its timeline row."""
    event: ApprovalGranted | ApprovalRejected
    reason = valid_text(reason)  # argv bytes that are not UTF-8 arrive as surrogates, which no event holds
    if approve:
        event = ApprovalGranted(call_id=parked.call_id, tool=parked.tool, args_sha256=parked.input_sha256,
                                plan_digest=parked.plan_digest, approver=approver, scope="once",
                                asked_by=parked.asked_by)
    else:
        event = ApprovalRejected(call_id=parked.call_id, tool=parked.tool, args_sha256=parked.input_sha256,
                                 approver=approver, reason=reason)
    said = f"{'approved' if approve else 'denied'} by {approver}" + (f": {reason}" if reason else "")
    row = ApprovalRow(turn=turn, call_id=parked.call_id, tool=parked.tool,
                      decision="approved" if approve else "rejected", by=approver, outcome="recorded",
                      summary=mask(said), args_sha256=parked.input_sha256, plan_digest=parked.plan_digest)
    return event, row
