"""A secret quoted in the Messages API's error message (a proxy that echoes the request's key, say) is masked in
every line Strata prints about the failure: the error line of `strata run` and `strata resume` on stderr, the
`--json` result, and the reason the session records (the daemon's clients and `strata chat` show that reason)."""

from __future__ import annotations

from pathlib import Path

from tests.cli._helpers import assert_clean_stderr, json_lines
from tests.conftest import StrataCLI
from tests.wire.messages_server import Fault, MessagesServer
from tests.wire.wire_helpers import model_env

MODEL = "anthropic:claude-test"
# shaped like an Anthropic key (so masking knows it), obviously not one
QUOTED_KEY = "sk-ant-api03-" + "X" * 93 + "AA"


def test_a_key_in_the_apis_refusal_is_masked_on_stderr_and_in_the_result(cli: StrataCLI,
                                                                          messages_server: MessagesServer,
                                                                          workspace: Path) -> None:
    refusal = Fault(400, message=f"invalid x-api-key {QUOTED_KEY} for this organization")
    messages_server.script(refusal, refusal)
    proc = cli.run("run", "--model", MODEL, "--workspace", str(workspace), "--json", "hi",
                   env=model_env(messages_server))
    assert_clean_stderr(proc)
    assert proc.returncode == 1, proc.stderr
    (result,) = [o for o in json_lines(proc.stdout) if o.get("type") == "result"]
    assert "invalid x-api-key [MASKED:anthropic_key:" in result["reason"], result["reason"]
    plain = cli.run("resume", result["session_id"], "--model", MODEL, "again", env=model_env(messages_server))
    assert "[MASKED:anthropic_key:" in plain.stderr, plain.stderr
    for text in (proc.stderr, result["reason"], plain.stderr):
        assert QUOTED_KEY not in text

