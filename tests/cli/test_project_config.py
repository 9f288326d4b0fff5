"""A project's `.strata/config.toml` (an allow rule and a command hook) has no effect until `strata trust`;
editing it revokes the trust; an approval is bound to the exact arguments a hook produced."""

from __future__ import annotations

import json
from pathlib import Path

from tests._in_process_cli import json_lines_in_process, set_up_in_process, show_in_process
from tests.cli._helpers import result_line, text, tool_use
from tests.conftest import StrataCLI, write_script

HOOK = """\
import json, pathlib, sys
call = json.load(sys.stdin)
pathlib.Path("hook-ran.log").open("a").write(call["tool"] + "\\n")
args = dict(call["input"])
suffix = pathlib.Path("suffix.txt")
args["content"] = args["content"].upper() + (suffix.read_text() if suffix.exists() else "")
print(json.dumps({"decision": "rewrite", "input": args, "reason": "house style"}))
"""

CONFIG = """\
[[policy.rules]]
tool = "write_file"
action = "allow"

[[hooks.pre_tool_use]]
matcher = "write_file"
command = "python3 hook.py"
timeout_s = 20
"""


def _project(workspace: Path, config: str = CONFIG) -> Path:
    (workspace / ".strata").mkdir(exist_ok=True)
    (workspace / "hook.py").write_text(HOOK)
    path = workspace / ".strata" / "config.toml"
    path.write_text(config)
    return path


def _run(cli: StrataCLI, workspace: Path, tmp_path: Path, *extra: str) -> tuple[int, dict, str]:
    script = write_script(tmp_path / "turns.json", [
        [tool_use("toolu_w", "write_file", path="out.txt", content="hello")], [text("done")]])
    proc = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", *extra, "go")
    result = result_line(proc.stdout)
    assert result is not None, proc.stderr
    return proc.returncode, result, proc.stderr


def test_untrusted_project_config_has_no_effect_until_trusted(cli: StrataCLI, workspace: Path,
                                                              tmp_path: Path) -> None:
    """Untrusted: one notice, the allow rule and the hook are ignored (write denied, hook never ran). After
    `strata trust`: the rule allows the write and the command hook rewrites it. After an edit: ignored again."""
    config = _project(workspace)
    code, _, stderr = _run(cli, workspace, tmp_path)
    assert code == 0
    notices = [line for line in stderr.splitlines() if "notice" in line]
    assert len(notices) == 1 and "not trusted" in notices[0] and "strata trust" in notices[0], stderr
    assert not (workspace / "out.txt").exists() and not (workspace / "hook-ran.log").exists()

    trusted = cli.run("trust", str(workspace))
    assert trusted.returncode == 0, trusted.stderr
    code, _, stderr = _run(cli, workspace, tmp_path)
    assert code == 0 and "notice" not in stderr, stderr
    assert (workspace / "out.txt").read_text() == "HELLO"
    assert (workspace / "hook-ran.log").read_text() == "write_file\n"

    config.write_text(CONFIG + "\n# an edit\n")
    (workspace / "out.txt").unlink()
    code, _, stderr = _run(cli, workspace, tmp_path)
    assert code == 0 and "changed" in stderr, stderr
    assert not (workspace / "out.txt").exists()
    assert (workspace / "hook-ran.log").read_text() == "write_file\n"


def test_malformed_project_config_is_one_clear_error(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """A bad action in the project file stops the run with exit 2 and one line naming the file and the key."""
    _project(workspace, CONFIG.replace('action = "allow"', 'action = "permit"'))
    script = write_script(tmp_path / "turns.json", [[text("done")]])
    proc = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "go")
    assert proc.returncode == 2
    assert "config.toml" in proc.stderr and "policy.rules[0].action" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) <= 2


def test_a_call_changed_after_its_approval_is_not_run(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """The approval binds the arguments the hook produced; when the hook produces different ones on resume, the
    call is parked again instead of run, and runs only after a new approval."""
    _project(workspace, CONFIG.replace('action = "allow"', 'action = "ask"'))
    assert set_up_in_process(cli, "trust", str(workspace)).returncode == 0
    (workspace / "suffix.txt").write_text("-v1")
    code, result, stderr = _run(cli, workspace, tmp_path, "--on-ask", "park")
    assert code == 4, stderr
    session_id = result["session_id"]
    assert result["parked"][0]["input"]["content"] == "HELLO-v1"
    assert cli.run("approve", session_id, "toolu_w").returncode == 0

    (workspace / "suffix.txt").write_text("-v2")  # the hook now rewrites the call into something else
    again = cli.run("resume", session_id, "--json")
    assert again.returncode == 4, again.stderr
    parked = result_line(again.stdout)
    assert parked is not None and parked["parked"][0]["input"]["content"] == "HELLO-v2"
    assert not (workspace / "out.txt").exists()

    assert cli.run("approve", session_id, "toolu_w").returncode == 0
    done = cli.run("resume", session_id)
    assert done.returncode == 0, done.stderr
    assert (workspace / "out.txt").read_text() == "HELLO-v2"
    assert [json.loads(x)["status"] for x in cli.run("receipts", session_id, "--json").stdout.splitlines()] == ["done"]


def test_the_readme_command_hook_example_works(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """examples/hooks (the README's command hook): a trusted project blocks writes to .env and allows others."""
    examples = Path(__file__).resolve().parents[2] / "examples" / "hooks"
    (workspace / ".strata").mkdir()
    (workspace / ".strata" / "config.toml").write_text((examples / "config.toml").read_text())
    (workspace / ".strata" / "deny_env_writes.sh").write_text((examples / "deny_env_writes.sh").read_text())
    assert set_up_in_process(cli, "trust", str(workspace)).returncode == 0
    script = write_script(tmp_path / "turns.json", [
        [tool_use("toolu_env", "write_file", path=".env", content="X=1\n"),
         tool_use("toolu_ok", "write_file", path="notes.txt", content="fine\n")], [text("done")]])
    proc = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "go")
    assert proc.returncode == 0, proc.stderr
    assert not (workspace / ".env").exists()
    assert (workspace / "notes.txt").read_text() == "fine\n"
    (session,) = json_lines_in_process(cli, "sessions", "--json")
    results = {b["tool_use_id"]: b for m in show_in_process(cli, session["id"])["messages"] for b in m["content"]
               if b["type"] == "tool_result"}
    assert "never write .env files" in results["toolu_env"]["content"]
