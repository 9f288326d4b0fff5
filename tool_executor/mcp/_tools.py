"""An MCP server's tools as Strata tools: `mcp__SERVER__TOOL`, the server's input schema, and the resource policy
config declares (safety, effect, PII, resource-key templates, timeout). A tool without a declared policy is never
made a ToolSpec: it is listed as unavailable with the reason, and is not in any plan.

A call's outcome (tool_executor/mcp/_answers.py tells the errors apart): the result's text (an `isError` result is
an error result). The server's JSON-RPC error answer refuses that call only (an error naming the server's code and
message; the server stays up, whatever the code). A connection that ends during the call makes an effectful call's
outcome unknown (ToolTimeout: the executor keeps its receipt `unknown` for `strata reconcile`), and a read-only or
idempotent call is retried once on the restarted server. An answer Strata could not read (not JSON-RPC, over the
bound, an HTTP error status, a result that is not a tool result) is not a refusal: the server had the call, so an
effectful call's outcome is unknown at once, and another is an error (not retried); so is an HTTP call whose
answer's event stream ended before the answer, without the server being given up on.

Output schemas of remote tools are not enforced: a result whose structured content does not fit the tool's declared
output schema (or that has none) is the result, as its content says (tool_executor/mcp/_server.py)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

import anyio

from config.mcp import McpToolPolicy
from core.record import record
from core.tools import ToolContext, ToolError, ToolOutput, ToolSpec, ToolTimeout
from tool_executor.mcp._server import ListedTool, ServerGone, ServerLink

PREFIX = "mcp__"
MAX_RESULT_CHARS = 256 * 1024
"""An MCP result longer than this is cut (with a note): a server's answer is not ours to bound otherwise."""
MAX_ERROR_CHARS = 2000
"""A server's error message (or what could not be read of its answer) is kept up to this many characters."""
MAX_DESCRIPTION_CHARS = 4096
"""A server's tool description goes into every model request: longer ones are cut."""
MAX_SCHEMA_BYTES = 64 * 1024
"""A tool's input schema goes into every model request, and checking it costs about a millisecond per subschema:
a tool whose schema is longer than this (as JSON) is unavailable."""
_MODEL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


def mcp_tool_name(server: str, tool: str) -> str:
    return f"{PREFIX}{server}__{tool}"


@record
class ToolStatus:
    """One tool of one server as a listing shows it."""

    server: str
    tool: str
    name: str
    callable: bool
    reason: str | None = None
    """Why it is not callable."""
    policy: McpToolPolicy | None = None
    description: str = ""
    input_schema: Mapping[str, Any] | None = None


def tool_statuses(link: ServerLink) -> list[ToolStatus]:
    """Every tool the server lists, callable or not, and each policy config declares for a tool it does not list."""
    decl = link.decl
    out: list[ToolStatus] = []
    listed = {t.name for t in link.tools}
    twice = {n for n, k in Counter(t.name for t in link.tools).items() if k > 1}
    for tool in link.tools:
        name = mcp_tool_name(decl.name, tool.name)
        policy = decl.policy(tool.name)
        reason = None
        if tool.name in twice:  # which of them a call would reach, and which schema checks it, is not known
            reason = "the server lists more than one tool named so: none of them is offered"
        elif not _MODEL_NAME.match(name):
            reason = "its name cannot be offered to a model (letters, digits, '_' and '-', at most 128)"
        elif policy is None:  # before the schema check (milliseconds a schema): a server may list thousands
            reason = (f"no resource policy declared: add [mcp.servers.{decl.name}.tools.{tool.name}] with safety, "
                      "effect, pii and resource_keys to make it callable")
        elif (problem := _schema_problem(tool.input_schema)) is not None:
            reason = f"its input schema cannot be used: {problem}"
        out.append(ToolStatus(decl.name, tool.name, name, reason is None, reason, policy, tool.description,
                              tool.input_schema))
    for declared, declared_policy in decl.tools:
        if declared not in listed and link.up:
            out.append(ToolStatus(decl.name, declared, mcp_tool_name(decl.name, declared), False,
                                  "declared in config, but the server does not list it", declared_policy))
    return out


def _schema_problem(schema: Mapping[str, Any]) -> str | None:
    """Why a server's input schema cannot check calls (the executor builds a validator for every tool of a plan,
    so one broken schema must not reach it), or None. Its size is looked at before anything checks it."""
    from tool_executor.checks.schema import meta_schema_problem

    if schema.get("type") != "object":
        return "it does not describe an object"
    try:
        size = len(json.dumps(schema, ensure_ascii=False, separators=(",", ":")).encode())
    except (TypeError, ValueError, RecursionError):
        return "it is not JSON"
    if size > MAX_SCHEMA_BYTES:
        return (f"it is too large ({size} bytes of JSON, at most {MAX_SCHEMA_BYTES} bytes): it would "
                "go into every model request")
    if {"unevaluatedProperties", "patternProperties"} <= _keywords(schema):
        return ("it uses unevaluatedProperties with patternProperties, whose patterns Strata cannot match there "
                "within a time limit")
    return meta_schema_problem(schema)


def _keywords(schema: Mapping[str, Any]) -> set[str]:
    """Every key of every object in `schema` (so also property names: a superset of the keywords it uses)."""
    found: set[str] = set()
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            found.update(str(k) for k in node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def tool_specs(link: ServerLink) -> list[ToolSpec]:
    """The callable tools of a server that is up."""
    listed = {t.name: t for t in link.tools}
    return [_spec(link, listed[s.tool], s.policy) for s in tool_statuses(link)
            if s.callable and s.policy is not None]


def _spec(link: ServerLink, tool: ListedTool, policy: McpToolPolicy) -> ToolSpec:
    templates = policy.resource_keys

    async def handler(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        return await _call(link, tool, dict(args), policy, ctx)

    def keys(args: Mapping[str, Any], ctx: ToolContext) -> list[str]:
        return [t.format_map(_Args(args)) for t in templates]

    return ToolSpec(
        name=mcp_tool_name(link.name, tool.name),
        description=(tool.description or f"{tool.name} (MCP server {link.name})")[:MAX_DESCRIPTION_CHARS],
        input_schema=tool.input_schema, handler=handler, safety=policy.safety, effect=policy.effect,
        pii=policy.pii, timeout_s=policy.timeout_s, path_args=policy.path_args,
        resource_keys=keys if templates else None,
        declared={"server": link.name, "transport": link.decl.transport, "resource_keys": list(templates)})


class _Args(dict[str, str]):
    def __init__(self, args: Mapping[str, Any]) -> None:
        super().__init__({k: v if isinstance(v, str) else json.dumps(v) for k, v in args.items()})

    def __missing__(self, key: str) -> str:
        return "?"


def _changed(link: ServerLink, planned: ListedTool) -> str | None:
    """How the server (started again since the session's plan was made) lists the tool now, when not as the plan
    has it: a call checked against one schema must not run against another, nor reach a tool the server dropped."""
    now = [t for t in link.tools if t.name == planned.name]
    if not now:
        return f"no longer lists {planned.name!r}"
    if len(now) > 1:
        return f"lists more than one tool named {planned.name!r}"
    if now[0].input_schema != planned.input_schema:
        return f"lists {planned.name!r} with another input schema than at the session's start"
    return None


async def _call(link: ServerLink, planned: ListedTool, args: dict[str, Any], policy: McpToolPolicy,
                ctx: ToolContext) -> ToolOutput:
    from mcp import MCPError

    from tool_executor.mcp._answers import error_kind

    tool = planned.name
    try:
        session = await link.session()
    except ServerGone as exc:  # nothing was sent: the call did not start
        raise ToolError(f"not run: MCP server {link.name!r} is not available ({exc}); no effect started") from None
    if (change := _changed(link, planned)) is not None:
        raise ToolError(f"not run: MCP server {link.name!r}, started again during this session, {change}; no effect "
                        "started (a new session uses the tools as they are now)")
    effectful = policy.effect == "effectful"
    retried = False
    while True:
        closed = True
        try:
            result = await session.call_tool(tool, args)  # the dispatch deadline bounds it
        except MCPError as exc:
            kind = error_kind(exc.code, exc.message)
            if kind == "closed" and await _still_answers(session):  # the server's own answer, worded as the SDK's
                kind = "refused"
            if kind == "refused":  # the server's own error answer to this call: it refused it, and stays up
                raise ToolError(f"MCP server {link.name!r} refused the call (error {exc.code}: "
                                f"{exc.message[:MAX_ERROR_CHARS]})") from None
            if kind == "unread":  # the server had the call
                raise _unread(link, effectful, exc.message) from None
            closed = kind == "closed"  # else its answer was lost on the way: the server is still there
            if not closed and effectful:
                raise ToolTimeout(f"MCP server {link.name!r} had the call, but its answer was lost "
                                  f"({exc.message[:300]}); whether the call took effect is unknown") from None
        except OSError:  # the HTTP connection failed under the call
            pass
        except (ValueError, RuntimeError) as exc:  # an answer that is no tool result (pydantic's ValidationError)
            raise _unread(link, effectful, f"{type(exc).__name__}: {exc}") from None
        else:
            return _output(result)
        # The connection ended during the call (or the call's answer was lost): the work may have been done.
        if link.cut is not None:  # Strata cut the server off for what it wrote: never asked again
            if effectful:
                raise ToolTimeout(f"MCP server {link.name!r} {link.cut} during the call; whether the call took "
                                  "effect is unknown")
            raise ToolError(f"MCP server {link.name!r} {link.cut} during the call; the call is not retried and the "
                            "server's tools are no longer available")
        if effectful:
            link.gone()
            raise ToolTimeout(f"MCP server {link.name!r} stopped during the call")
        if retried:
            if not closed:
                raise ToolError(f"MCP server {link.name!r} had the call, but its answer was lost, again when it "
                                "was retried")
            link.gone()
            raise ToolError(f"MCP server {link.name!r} stopped during the call, and again when it was retried")
        retried = True
        try:
            session = await link.restart()  # read-only or idempotent: once more, on the server started again
        except ServerGone as exc:
            raise ToolError(f"MCP server {link.name!r} stopped during the call and could not be started again "
                            f"({exc})") from None
        if (change := _changed(link, planned)) is not None:
            raise ToolError(f"MCP server {link.name!r} stopped during the call; it is not retried: the server "
                            f"started again {change}")


PING_S = 5.0
"""How long a server has to answer the ping that tells its 'Connection closed' answer from the connection closing."""


async def _still_answers(session: Any) -> bool:
    """Whether the connection a call ended on with 'Connection closed' still carries requests: the SDK's error when the
    connection closes is also what a server may answer with (a gateway whose own upstream connection closed). A ping
    on a closed connection fails at once; any answer within PING_S (an error too) says the server is there."""
    from mcp import MCPError

    from tool_executor.mcp._answers import error_kind

    with anyio.move_on_after(PING_S):
        try:
            await session.send_ping()
        except MCPError as exc:  # an answer all the same (a server without ping), unless the connection closed
            return error_kind(exc.code, exc.message) != "closed"
        except OSError:
            return False
        return True
    return False


def _unread(link: ServerLink, effectful: bool, why: str) -> ToolError:
    """The server answered the call with what Strata could not read: it had the call, so an effectful call's outcome
    is unknown (kept for `strata reconcile`); any other is an error, not retried."""
    if effectful:
        return ToolTimeout(f"MCP server {link.name!r} answered the call with what Strata could not read "
                           f"({why[:300]}); whether the call took effect is unknown")
    return ToolError(f"MCP server {link.name!r} answered the call with what Strata could not read: "
                     f"{why[:MAX_ERROR_CHARS]}")


def _output(result: Any) -> ToolOutput:
    from mcp.types import EmbeddedResource, ImageContent, TextContent

    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent):
            parts.append(f"[image: {block.mime_type}, {len(block.data)} base64 characters]")
        elif isinstance(block, EmbeddedResource):
            resource = block.resource
            parts.append(getattr(resource, "text", None) or f"[resource {resource.uri}]")
        else:
            parts.append(f"[{getattr(block, 'type', 'content')} block]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, sort_keys=True))
    text = "\n".join(parts) or "(the MCP tool returned no content)"
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[MCP result truncated: {len(text) - MAX_RESULT_CHARS} more characters]"
    return ToolOutput(text, is_error=bool(result.is_error))
