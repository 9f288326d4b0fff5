"""The model's API key is the Strata process's alone: a `bash` command did not inherit ANTHROPIC_API_KEY
(tool_executor/child_env.py), but it could read it from its parent's environment block, which the kernel shows any
process of the same user (`cat /proc/$PPID/environ`). Now the key is taken out of the environment as the command
starts (removed from os.environ, blanked in that block) and kept for every model the process builds: the
session's, a delegated child's, a daemon's sessions'. The model calls still carry it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.channels._support import write_config
from tests.cli._helpers import assert_clean_stderr, json_lines
from tests.conftest import StrataCLI, write_script
from tests.serve._procs import Client, Daemon
from tests.wire.conftest import TEST_KEY
from tests.wire.messages_server import MessagesServer, Reply, credential
from tests.wire.wire_helpers import assert_all_valid, messages_of, model_env, result_text, results_after, text, use

pytestmark = pytest.mark.slow

MODEL = "anthropic:claude-test"
# Every ancestor's environment block, from the command's parent (Strata) up to pid 1, one variable a line.
WALK = ('p=$PPID; while [ "$p" -gt 1 ]; do echo "== pid $p"; tr "\\0" "\\n" < /proc/$p/environ; '
        'p=$(sed "s/.*) //" /proc/$p/stat | cut -d" " -f2); done; echo "== end"')


def assert_no_key_shown(result: str) -> None:
    """The walk reached Strata and pid 1's child, and no ancestor's block holds the key (an emptied value, the
    variable's name before NULs, is what a blanked block shows)."""
    assert result.count("== pid ") >= 2 and "== end" in result and "PATH=" in result, result
    assert TEST_KEY not in result and "sk-ant-" not in result and "MASKED" not in result, result
    assert re.findall(r"^ANTHROPIC_API_KEY=.+$", result, re.M) == [], result


def assert_calls_carry_the_key(server: MessagesServer, n: int) -> None:
    assert_all_valid(server)
    assert [credential(r.headers) for r in server.requests] == [TEST_KEY] * n


def test_a_bash_command_of_strata_run_and_of_its_delegated_child_cannot_read_the_model_key(
        cli: StrataCLI, messages_server: MessagesServer, workspace: Path) -> None:
    """`strata run`: the session delegates; the child (built later in the same process, its model from the kept
    key) runs the walk, then the parent does; neither sees the key anywhere up the process tree, and every one of
    the five model calls carried it."""
    messages_server.script(
        Reply([text("Delegating."), use("delegate", "toolu_d", task="look at the environment")]),
        Reply([use("bash", "toolu_cb", command=WALK)]),
        Reply([text("child done")]),
        Reply([use("bash", "toolu_pb", command=WALK)]),
        Reply([text("All done.")]),
    )
    proc = cli.run("run", "--model", MODEL, "--workspace", str(workspace), "--allow", "bash", "--allow", "delegate",
                   "--json", "go", env=model_env(messages_server))
    assert_clean_stderr(proc)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    (result,) = [o for o in json_lines(proc.stdout) if o.get("type") == "result"]
    assert result["status"] == "completed", result
    assert_calls_carry_the_key(messages_server, 5)
    (child_walk,) = results_after(messages_of(messages_server.requests[2]), 1)
    (parent_walk,) = results_after(messages_of(messages_server.requests[4]), 3)
    assert_no_key_shown(result_text(child_walk))
    assert_no_key_shown(result_text(parent_walk))


def test_a_bash_command_of_a_daemon_hosted_session_cannot_read_the_model_key(
        cli: StrataCLI, messages_server: MessagesServer, tmp_path: Path) -> None:
    """`strata serve`: the daemon builds a hosted session's model after it started; the session's walk finds no
    key in the daemon's block (nor does the test, reading it), and its model calls carried the key."""
    ws = tmp_path / "ws"
    ws.mkdir()
    write_config(cli, '[[policy.rules]]\ntool = "bash"\naction = "allow"\n\n[daemon]\nenable = ["bash"]\n')
    messages_server.script(Reply([use("bash", "toolu_b", command=WALK)]), Reply([text("done")]))
    daemon = Daemon(cli, env=model_env(messages_server))
    try:
        driver = Client(cli, "--new", "--workspace", str(ws), "--model", MODEL)
        driver.send(type="prompt", text="go")
        result = driver.wait_for("result")
        driver.finish()
        shown = Path(f"/proc/{daemon.pid}/environ").read_bytes()
    finally:
        daemon.stop()
    assert result["status"] == "completed", result
    assert TEST_KEY.encode() not in shown and b"PATH=" in shown
    assert_calls_carry_the_key(messages_server, 2)
    (walk,) = results_after(messages_of(messages_server.requests[1]), 1)
    assert_no_key_shown(result_text(walk))



def test_the_auth_token_variable_is_blanked_too_though_strata_never_sends_it(
        cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """ANTHROPIC_AUTH_TOKEN is a credential of the same API (the SDK would send it when given no key; Strata always
    gives the key, so it never does): a `bash` command of a session cannot read it from Strata's environment block
    either (the walk written to a file of the workspace)."""
    token = "fake-auth-token-0123456789abcdef"
    script = write_script(tmp_path / "turns.json", [
        [{"type": "tool_use", "id": "toolu_w", "name": "bash", "input": {"command": f"({WALK}) > walk.txt"}}],
        [{"type": "text", "text": "done"}]])
    proc = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash", "--json",
                   "go", env={"ANTHROPIC_AUTH_TOKEN": token})
    assert_clean_stderr(proc)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    walk = (workspace / "walk.txt").read_text()
    assert walk.count("== pid ") >= 2 and "== end" in walk and "PATH=" in walk, walk
    assert token not in walk, walk
    assert re.findall(r"^ANTHROPIC_AUTH_TOKEN=.+$", walk, re.M) == [], walk
