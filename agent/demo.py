"""`strata demo`: an offline scripted session that shows what Strata is for. It reads and edits files, runs a
command, has one call denied (a write outside the workspace), is killed with SIGKILL in the middle of a batch,
is resumed by id without repeating the effect, reconciles the one uncertain effect, and prints how to inspect
everything. Real processes throughout: each step is the `strata` command a user would type."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from agent.outcome import EXIT_COMPLETED, EXIT_UNKNOWN_PENDING

Echo = Callable[[str], None]

GREET = 'def greet(name):\n    return f"Helo, {name}!"\n\n\nprint(greet("world"))\n'
PROMPT = "Fix the greeting typo in greet.py, check it runs, and record release-1 in releases.log."


def _script() -> list[list[dict[str, object]]]:
    return [
        [{"type": "text", "text": "Let me look at the workspace first."},
         {"type": "tool_use", "name": "list_dir", "input": {"path": "."}},
         {"type": "tool_use", "name": "read_file", "input": {"path": "greet.py"}}],
        [{"type": "text", "text": "The greeting says 'Helo'. Fixing it, then running the script."},
         {"type": "tool_use", "name": "edit_file", "input": {"path": "greet.py", "old": "Helo", "new": "Hello"}},
         {"type": "tool_use", "name": "bash", "input": {"command": "python3 greet.py"}}],
        [{"type": "text", "text": "I'll also keep a backup next to the workspace."},
         {"type": "tool_use", "name": "write_file", "input": {"path": "../greet.py.bak", "content": GREET}}],
        [{"type": "text", "text": "That was outside the workspace, so it was refused. Recording the release."},
         {"type": "tool_use", "name": "bash", "input": {"command": "echo release-1 >> releases.log"}},
         {"type": "tool_use", "name": "write_file",
          "input": {"path": "CHANGELOG.md", "content": "# Changelog\n\n- release-1: fix the greeting typo\n"}}],
        [{"type": "text", "text": "The greeting is fixed and runs; the changelog is written. The release line's "
                                  "outcome is unknown after the crash, so I did not write it again."}],
        [{"type": "text", "text": "The reconciliation says release-1 was recorded once. All done."}],
    ]


# Dispatches, in order: list_dir, read_file, edit_file, bash (run), [write outside: denied], bash (release).
KILL_AT = "after_dispatch:5"


class _Demo:
    def __init__(self, echo: Echo) -> None:
        self.echo = echo
        self.root = Path(tempfile.mkdtemp(prefix="strata-demo-"))
        self.ws = self.root / "workspace"
        self.ws.mkdir()
        (self.ws / "greet.py").write_text(GREET, encoding="utf-8")
        self.script = self.root / "model-script.json"
        self.script.write_text(json.dumps(_script(), indent=1), encoding="utf-8")

    def strata(self, *args: str, fault: str | None = None, show: bool = True) -> tuple[int, list[str]]:
        env = {k: v for k, v in os.environ.items() if k != "STRATA_FAULT"}
        env.setdefault("COLUMNS", "150")  # tables (the timeline) read better wide than wrapped
        if fault:
            env["STRATA_FAULT"] = fault
        self.echo(f"$ strata {' '.join(_quote(a) for a in args)}")
        proc = subprocess.Popen([sys.executable, "-m", "agent", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=env, cwd=self.root)
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if show:
                self.echo("  " + line.rstrip("\n"))
        return proc.wait(), lines

    def step(self, text: str) -> None:
        self.echo("")
        self.echo(f"== {text}")


def _quote(arg: str) -> str:
    return arg if arg and all(c.isalnum() or c in "-_:/.=" for c in arg) else json.dumps(arg)


def run_demo(echo: Echo) -> int:
    d = _Demo(echo)
    echo(f"Strata demo: a scripted model works in {d.ws}")

    d.step("1. Run the session. Edits and shell commands are allowed explicitly; the process will be killed "
           "(SIGKILL) right after it starts the 'release' command, in the middle of a batch.")
    code, lines = d.strata("run", "--model", f"script:{d.script}", "--workspace", str(d.ws), "--allow", "edit_file",
                           "--allow", "write_file", "--allow", "bash", PROMPT, fault=KILL_AT)
    session_id = next((ln.split()[1] for ln in lines if ln.startswith("session ")), None)
    if code != -signal.SIGKILL or session_id is None:
        echo(f"demo failed: expected the run to be killed, got exit {code}")
        return 1
    echo(f"  (killed by SIGKILL, exit {code}; session {session_id} is left mid-batch)")

    d.step("2. Resume it by id. The interrupted command has a 'dispatched' receipt, so it is NOT run again: "
           "its outcome becomes 'unknown'. The call that never started runs now.")
    code, _ = d.strata("resume", session_id)
    if code != EXIT_UNKNOWN_PENDING:
        echo(f"demo failed: expected exit {EXIT_UNKNOWN_PENDING} (unknown effects pending), got {code}")
        return 1

    releases = (d.ws / "releases.log").read_text().splitlines() if (d.ws / "releases.log").exists() else []
    d.step(f"3. Check the world: releases.log has {len(releases)} 'release-1' line(s). Reconcile the unknown "
           "receipt as a person would.")
    code, out = d.strata("receipts", session_id, "--status", "unknown", "--json", show=False)
    unknown = [json.loads(ln) for ln in out if ln.startswith("{")]
    if code != 0 or len(unknown) != 1 or releases != ["release-1"]:
        echo(f"demo failed: expected one unknown receipt and one release line, got {len(unknown)} and {releases}")
        return 1
    receipt = unknown[0]["id"]
    code, _ = d.strata("reconcile", receipt, "--applied", "--note", "releases.log holds exactly one release-1 line")
    if code != 0:
        return 1

    d.step("4. Resume with a prompt: the model hears the reconciled outcome and finishes.")
    code, _ = d.strata("resume", session_id, "Please confirm the release state.")
    if code != EXIT_COMPLETED:
        echo(f"demo failed: expected exit 0, got {code}")
        return 1

    d.step("5. What happened, and why: every call in the timeline with the check that decided it (the crash and "
           "the resume included), then the hash chain verified.")
    code, _ = d.strata("timeline", session_id, "--kind", "call")
    if code != 0:
        echo(f"demo failed: strata timeline exited {code}")
        return 1
    code, _ = d.strata("timeline", session_id, "--verify")
    if code != 0:
        echo(f"demo failed: the timeline did not verify (exit {code})")
        return 1

    fixed = "Hello" in (d.ws / "greet.py").read_text()
    outside = (d.root / "greet.py.bak").exists()
    echo("")
    echo("== Summary")
    echo(f"  session             {session_id}")
    echo(f"  greet.py fixed      {'yes' if fixed else 'NO'}")
    echo(f"  write outside       {'WRITTEN (bug!)' if outside else 'denied by the scope check, nothing written'}")
    echo(f"  release-1 recorded  {len(releases)} time(s), although the process was killed mid-command")
    echo(f"  CHANGELOG.md        {'written after resume' if (d.ws / 'CHANGELOG.md').exists() else 'missing'}")
    echo("")
    echo("Inspect it:")
    echo(f"  strata show {session_id}")
    echo(f"  strata show {session_id} --json")
    echo(f"  strata receipts {session_id}")
    echo(f"  strata timeline {session_id}")
    echo("  strata sessions")
    return 0 if fixed and not outside and len(releases) == 1 else 1
