"""Who may use `strata mcp serve --http`: a client that sends `Authorization: Bearer TOKEN`, the token read from the
environment variable `--token-env NAME` or `[mcp.serve] token_env` names (16 characters or more, as a webhook
channel's). Any other request (no header, another scheme, a wrong token) is answered 401 by `BearerGate`, the
outermost layer of the HTTP app, before the SDK's session machinery or a tool sees it. The token is compared in
constant time and never logged, printed or passed on: once read, its variable is removed from the server's
environment, so no process the server starts (a `bash` call, an MCP server) inherits it, and its value is overwritten
in the environment block the process started with (what /proc/PID/environ and `ps e` show on Linux)."""

from __future__ import annotations

import hmac
import json
import os
import re
from collections.abc import MutableMapping
from typing import Any

from core.env_block import take_secret
from core.errors import UsageError

MIN_TOKEN_CHARS = 16
UNAUTHORIZED = -32001
"""The JSON-RPC error code of a 401 (one of the codes JSON-RPC leaves to servers)."""
REFUSAL = "missing or wrong bearer token (send `Authorization: Bearer TOKEN`)"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VISIBLE_ASCII = re.compile(r"^[\x21-\x7e]+$")
_HOW = ("set `token_env = \"NAME\"` under `[mcp.serve]` in the user config, or pass `--token-env NAME`, with the "
        f"environment variable NAME holding a bearer token of {MIN_TOKEN_CHARS} characters or more")

Scope = MutableMapping[str, Any]
Receive = Any
Send = Any


def bearer_token(flag_env: str | None, config_env: str | None,
                 env: MutableMapping[str, str] | None = None) -> str:
    """The bearer token `--http` requires, from the variable `flag_env` names (else `config_env`'s), removed from
    `env` (default: this process's environment) once read; UsageError, saying how to set it, when neither names
    one or the variable is unset, empty, too short or not sendable in a header. The token is never quoted."""
    env = os.environ if env is None else env
    name = flag_env if flag_env is not None else config_env
    if name is None:
        raise UsageError(f"`strata mcp serve --http` needs a bearer token; {_HOW}")
    if not _ENV_NAME.match(name):
        raise UsageError(f"--token-env takes an environment variable name (letters, digits, '_'; got {name!r})")
    token = env.get(name, "")
    if not token:
        raise UsageError(f"`strata mcp serve --http` needs a bearer token, and the environment variable {name} "
                         f"{'is empty' if name in env else 'is not set'}: set it to a token of {MIN_TOKEN_CHARS} "
                         "characters or more")
    if len(token) < MIN_TOKEN_CHARS:
        raise UsageError(f"the environment variable {name} holds a bearer token of {len(token)} characters: "
                         f"{MIN_TOKEN_CHARS} or more are required")
    if not _VISIBLE_ASCII.match(token):
        raise UsageError(f"the bearer token in the environment variable {name} must be visible ASCII characters "
                         "only (no spaces or control characters): a client could not send it in a header")
    if env is os.environ:
        take_secret(name)  # out of the environment and /proc, kept for the sessions' maskers (core/env_block.py)
    else:
        env.pop(name, None)
    return token


class BearerGate:
    """The ASGI app `app` behind a bearer check: an HTTP request whose one `Authorization` header is not exactly
    `Bearer TOKEN` is answered 401 (a WebSocket closed) without `app` seeing it; lifespan events pass through."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    def allows(self, headers: list[tuple[bytes, bytes]]) -> bool:
        given = [value for name, value in headers if name.lower() == b"authorization"]
        # compare_digest's time depends on the length only, and both are compared whatever came first
        return len(given) == 1 and hmac.compare_digest(given[0], self._expected)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self.allows(list(scope.get("headers", []))):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        # A JSON-RPC error, so that an MCP client says why (it shows a non-2xx answer's JSON-RPC error as itself)
        body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": UNAUTHORIZED, "message": REFUSAL}}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b'Bearer realm="strata"')]})
        await send({"type": "http.response.body", "body": body})
