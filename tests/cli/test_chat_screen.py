"""The chat screen as a person sees it: `strata chat` in a real terminal (tmux), its screen read back with colours.
Markdown is rendered (bold is bold, a code fence is highlighted code, no `**` or backticks), a spinner with the
elapsed time moves while a 3 s command runs, an edit_file approval is a coloured diff, the first Ctrl-C clears a
half-typed line and stays, the second leaves. With STRATA_SCREENSHOTS=1 the screen is saved as
docs/chat-screen.svg (the README shows it)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process, show_in_process
from tests._system import TMUX
from tests._tmux import save_svg, style_of, tmux_pane
from tests.cli._helpers import text, tool_use
from tests.conftest import REPO, StrataCLI, write_script

pytestmark = pytest.mark.slow

WIDTH = 110
RED, GREEN = 1, 2
"""The standard colours' numbers, as tmux reports them."""
SPINNER = "[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]"
ANSWER = ("Here is the plan, in **bold** and *italic*:\n\n1. read `greet.py`\n2. use an f-string\n\n"
          "```python\ndef greet(name):\n    return f\"hello {name}\"\n```\n\nFirst, the tests.")


def _script(tmp_path: Path) -> Path:
    return write_script(tmp_path / "turns.json", [
        [text(ANSWER), tool_use("toolu_tests", "bash", command="sleep 3; printf 'test %s ok\\n' 1 2 3 4 5 6 7 8 9")],
        [tool_use("toolu_edit", "edit_file", path="greet.py", old='    return "hello " + name\n',
                  new='    return f"hello {name}"\n')],
        [text("Done: `greet.py` now uses an **f-string**.")],
    ])


def test_chat_screen_markdown_spinner_diff_and_ctrl_c(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    tmux = TMUX.require()
    (workspace / "greet.py").write_text('def greet(name):\n    return "hello " + name\n', encoding="utf-8")
    env = {**cli.env(), "TERM": "xterm-256color", "COLORTERM": "truecolor"}
    env.pop("NO_COLOR", None)
    argv = [*cli.argv(["chat", "--model", f"script:{_script(tmp_path)}", "--workspace", str(workspace),
                       "--allow", "bash"])]
    with tmux_pane(tmux, argv, cwd=cli.cwd, env=env, width=WIDTH, height=50) as pane:
        pane.wait_for(r"^strata>")
        pane.type("make greet.py nicer")

        # Markdown: styled, not as typed.
        pane.wait_for(r"assistant: Here is the plan, in bold and italic:")
        coloured = pane.screen(colours=True)
        plain = pane.screen()
        assert "**" not in plain and "```" not in plain and "`greet.py`" not in plain, plain
        assert style_of(coloured, "bold and").bold
        assert style_of(coloured, "italic:").italic
        code = style_of(coloured, "greet(name)")
        assert code.color is not None or code.bgcolor is not None, "the code fence is not highlighted"

        # Something moves while the 3 s command runs: a spinner, the tool and its command, the elapsed time.
        first = pane.wait_for(rf"{SPINNER} running \[bash\] sleep 3; printf.*  ([0-9]) s", timeout=10)
        later = pane.wait_for(rf"{SPINNER} running \[bash\] sleep 3.*  ([2-9]) s", timeout=10)
        assert int(later.group(1)) > int(first.group(1))

        # The result as a short block, then the edit_file approval as a coloured diff.
        pane.wait_for(r"<- bash ok \(10 lines")
        pane.wait_for(r"… 4 more lines, .* /show toolu_tests")
        pane.wait_for(r"approve\? \[y/n/a\]")
        coloured = pane.screen(colours=True)
        plain = pane.screen()
        assert re.search(r"^\s+--- greet.py \(old\)$", plain, re.MULTILINE), plain
        removed, added = style_of(coloured, '-    return "hello "'), style_of(coloured, '+    return f"hello')
        assert removed.color is not None and removed.color.number == RED, removed
        assert added.color is not None and added.color.number == GREEN, added
        assert "\\n" not in plain.split("approval needed: edit_file")[1], "an argument is shown JSON-escaped"
        if os.environ.get("STRATA_SCREENSHOTS") == "1":
            save_svg(coloured, REPO / "docs" / "chat-screen.svg", "strata chat", WIDTH)
        pane.type("y")
        pane.wait_for(r"assistant: Done: greet.py now uses an f-string.")
        assert (workspace / "greet.py").read_text() == 'def greet(name):\n    return f"hello {name}"\n'

        # Ctrl-C at the prompt: the first clears the half-typed line and stays, the second leaves.
        pane.wait_for(r"^strata>\s*$")
        pane.keys("half typed")
        pane.wait_for(r"^strata> half typed")
        pane.keys("C-c")
        pane.wait_for(r"line cleared; Ctrl-C again to leave")
        assert "half typed" not in pane.screen() and pane.alive()
        pane.keys("C-c")
        pane.wait_for(r"left session [0-9a-f-]{36}\. resume it: strata chat --resume")
    # The first prompt named the session, as `strata run` names one.
    assert [r["title"] for r in json_lines_in_process(cli, "sessions", "--json")] == ["make greet.py nicer"]


def test_chat_without_a_terminal_refuses_in_one_line_and_creates_nothing(cli: StrataCLI, workspace: Path,
                                                                         tmp_path: Path) -> None:
    """stdin from a pipe: one line that says to use `strata run`, exit 2, no session, no chat history."""
    proc = cli.run("chat", "--model", f"script:{_script(tmp_path)}", "--workspace", str(workspace),
                   input="make greet.py nicer\n")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and "needs a terminal" in lines[0] and "strata run" in lines[0], lines
    assert json_lines_in_process(cli, "sessions", "--json") == []
    assert not (cli.home / "chat_history").exists()


def test_after_ctrl_c_each_call_is_accounted_for_and_show_prints_a_whole_result(cli: StrataCLI, workspace: Path,
                                                                                tmp_path: Path) -> None:
    """Ctrl-C during a batch: the screen says per call what happened (finished, started with an unknown outcome
    and how to reconcile it, not run); `/show PREFIX` and `/last` print a call's whole result."""
    tmux = TMUX.require()
    long_output = "; ".join(f"echo line {i}" for i in range(1, 21))
    script = write_script(tmp_path / "turns.json", [
        [tool_use("toolu_fast", "bash", command=long_output), tool_use("toolu_slow", "bash", command="sleep 30"),
         tool_use("toolu_after", "bash", command="echo after")],
    ])
    env = {**cli.env(), "TERM": "xterm-256color"}
    argv = cli.argv(["chat", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash"])
    with tmux_pane(tmux, argv, cwd=cli.cwd, env=env, width=WIDTH, height=60) as pane:
        pane.wait_for(r"^strata>")
        pane.type("three commands")
        pane.wait_for(r"… 15 more lines, .* /show toolu_fast")
        pane.wait_for(rf"{SPINNER} running \[bash\] sleep 30")
        pane.keys("C-c")
        pane.wait_for(r"interrupted: the turn stopped and every call has its result:")
        pane.wait_for(r"bash .* \(toolu_fast\): finished before the interrupt")
        pane.wait_for(r"bash sleep 30 \(toolu_slow\): started, outcome unknown \(the command was killed after it had "
                      r"printed\s+nothing;\s+its\s+whole\s+process\s+group\s+is\s+gone\): .*\n"
                      r"\s+strata reconcile toolu_slow --applied +\(or --not-applied\)\n"
                      r"\s+\(its receipt rcpt_\w+: reconcile takes either id\)")
        pane.wait_for(r"bash echo after \(toolu_after\): not run")
        pane.wait_for(r"^strata>\s*$")
        pane.type("/show toolu_fa")
        pane.wait_for(r"result of toolu_fast \(bash, ok, \d+ bytes, whole\):")
        pane.wait_for(r"^line 20$")
        pane.type("/last")
        pane.wait_for(r"result of toolu_after \(bash, error, \d+ bytes, whole\):")
        pane.wait_for(r"^strata>\s*$")
        pane.keys("C-d")
        pane.wait_for(r"left session")


def test_always_offers_the_command_pattern_first_and_the_grant_holds_only_for_it(cli: StrataCLI, workspace: Path,
                                                                                 tmp_path: Path) -> None:
    """For a plain command, `a` is "always for commands with this first word" (said exactly), `e` the whole tool.
    The pattern grant lets the next `echo` through without asking, but not another command nor a compound line
    that starts with `echo`; a headless resume honours it the same way."""
    tmux = TMUX.require()
    script = write_script(tmp_path / "turns.json", [
        [tool_use("b1", "bash", command="echo one")],
        [tool_use("b2", "bash", command="echo two")],
        [tool_use("b3", "bash", command="echo three; touch compound.txt")],
        [tool_use("b4", "bash", command="touch other.txt")],
        [text("done")],
        [tool_use("b5", "bash", command="echo four")],
        [tool_use("b6", "bash", command="touch headless.txt")],
        [text("resumed")],
    ])
    env = {**cli.env(), "TERM": "xterm-256color"}
    argv = cli.argv(["chat", "--model", f"script:{script}", "--workspace", str(workspace)])
    with tmux_pane(tmux, argv, cwd=cli.cwd, env=env, width=WIDTH, height=60) as pane:
        session_id = pane.wait_for(r"session ([0-9a-f-]{36}) \(interactive\)").group(1)
        pane.type("echo things")
        pane.wait_for(r"a always: bash commands matching `echo \*`, for the rest of this session, when the same rule "
                      r"asks")
        pane.wait_for(r"e always: every bash call, for the rest of this session")
        pane.wait_for(r"approve\? \[y/n/a/e\]")
        pane.type("a")
        pane.wait_for(r"allowed from now on: bash commands matching `echo \*`")
        pane.wait_for(r"<- bash ok .*\n.*\n.*one")
        pane.wait_for(r"<- bash ok .*\n.*\n.*two")  # no question for the second echo
        pane.wait_for(r"approval needed: bash[\s\S]*echo three; touch compound.txt")
        assert pane.screen().count("approval needed") == 2
        pane.wait_for(r"approve\? \[y/n/a\]\s*$")  # a compound line: no narrower choice
        pane.type("n")
        pane.wait_for(r"reason for the model")
        pane.type("")
        pane.wait_for(r"you said no to bash \(no reason given\)")
        pane.wait_for(r"approval needed: bash[\s\S]*touch other.txt[\s\S]*matching `touch \*`")
        pane.type("n")
        pane.wait_for(r"reason for the model")
        pane.type("not now")
        pane.wait_for(r"you said no to bash: not now")
        pane.wait_for(r"assistant: done")
        pane.wait_for(r"^strata>\s*$")  # the prompt is back (a key typed before it is drawn may be lost)
        pane.keys("C-d")
        pane.wait_for(r"left session")
    assert not (workspace / "compound.txt").exists() and not (workspace / "other.txt").exists()
    resumed = cli.run("resume", session_id, "more")
    assert "b5" not in resumed.stdout or "DENIED" not in resumed.stdout.split("b5")[0]
    view = show_in_process(cli, session_id)
    results = {b["tool_use_id"]: b for m in view["messages"] for b in m["content"] if b["type"] == "tool_result"}
    assert "four" in results["b5"]["content"] and not results["b5"]["is_error"], results["b5"]
    assert results["b6"]["is_error"] and not (workspace / "headless.txt").exists(), results["b6"]


def test_ctrl_c_at_an_approval_prompt_denies_the_call_and_asks_the_model_nothing_more(cli: StrataCLI,
                                                                                       workspace: Path,
                                                                                       tmp_path: Path) -> None:
    """Ctrl-C at `approve?` answers no and stops the turn there: the scripted model (which answers without
    waiting) is not asked for its next turn, and the session is left idle, not completed."""
    tmux = TMUX.require()
    script = write_script(tmp_path / "turns.json", [
        [tool_use("toolu_ask", "bash", command="git status --short")],
        [text("SHOULD NOT BE ASKED")],
    ])
    env = {**cli.env(), "TERM": "xterm-256color"}
    argv = cli.argv(["chat", "--model", f"script:{script}", "--workspace", str(workspace)])
    with tmux_pane(tmux, argv, cwd=cli.cwd, env=env, width=WIDTH, height=50) as pane:
        pane.wait_for(r"^strata>")
        pane.type("check the tree")
        pane.wait_for(r"approve\? \[y/n/a/e\]")
        pane.keys("C-c")
        pane.wait_for(r"bash git status --short \(toolu_ask\): denied before the interrupt")
        pane.wait_for(r"^strata>\s*$")
        assert "SHOULD NOT BE ASKED" not in pane.screen()
        pane.keys("C-d")
        pane.wait_for(r"left session")
    rows = json_lines_in_process(cli, "timeline", "last", "--json")
    assert [r["summary"] for r in rows if r["kind"] == "model_attempt"] == ["scripted turn 0"], rows
    assert not [r for r in rows if r["kind"] == "lifecycle" and r["outcome"] == "ended"], rows


def test_a_long_line_in_an_approval_folds_inside_its_block(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """A write_file line with no space wider than the screen stays beside its `│` gutter, folded (it was pushed
    below the gutter to the left edge, leaving what looked like an empty first line); every character is shown."""
    tmux = TMUX.require()
    long_line = "A" * 150
    script = write_script(tmp_path / "turns.json", [
        [tool_use("toolu_w", "write_file", path="a.txt", content=f"first\n{long_line}\nlast\n")],
    ])
    env = {**cli.env(), "TERM": "xterm-256color"}
    argv = cli.argv(["chat", "--model", f"script:{script}", "--workspace", str(workspace)])
    with tmux_pane(tmux, argv, cwd=cli.cwd, env=env, width=50, height=40) as pane:
        pane.wait_for(r"^strata>")
        pane.type("write it")
        pane.wait_for(r"approve\? \[y/n/a\]")
        screen = pane.screen()
        block = screen.split("content (3 lines")[1].split("call toolu_w")[0].splitlines()[1:]
        assert block[0].strip() == "│ first", block
        assert block[1].startswith("    │ AAAA"), block
        folded = [line for line in block if "A" in line]
        assert all(line.startswith(("    │ A", "      A")) for line in folded), block
        assert sum(line.count("A") for line in folded) == len(long_line), block
        assert block[len(folded) + 1].strip() == "│ last", block
        pane.keys("C-c")
        pane.wait_for(r"^strata>\s*$")
        pane.keys("C-d")
        pane.wait_for(r"left session")


def test_ctrl_c_at_the_reason_prompt_keeps_the_no_and_stops_the_turn(cli: StrataCLI, workspace: Path,
                                                                      tmp_path: Path) -> None:
    """After `n`, Ctrl-C at "reason for the model" keeps the no (without a reason) and interrupts the turn as at
    `approve?`: the batch's next call is not asked about and not run (it went on to the next approval)."""
    tmux = TMUX.require()
    script = write_script(tmp_path / "turns.json", [
        [tool_use("toolu_one", "bash", command="echo one > one.txt"),
         tool_use("toolu_two", "bash", command="echo two > two.txt")],
        [text("SHOULD NOT BE ASKED")],
    ])
    env = {**cli.env(), "TERM": "xterm-256color"}
    argv = cli.argv(["chat", "--model", f"script:{script}", "--workspace", str(workspace)])
    with tmux_pane(tmux, argv, cwd=cli.cwd, env=env, width=WIDTH, height=50) as pane:
        pane.wait_for(r"^strata>")
        pane.type("two writes")
        pane.wait_for(r"approve\? \[y/n/a\]")
        pane.type("n")
        pane.wait_for(r"reason for the model \(optional\):")
        pane.keys("half a reason", "C-c")
        pane.wait_for(r"you said no to bash \(no reason given\)")
        pane.wait_for(r"\(toolu_one\): denied before the interrupt")
        pane.wait_for(r"\(toolu_two\): not run")
        pane.wait_for(r"^strata>\s*$")
        screen = pane.screen()
        assert screen.count("approval needed") == 1, screen
        assert "SHOULD NOT BE ASKED" not in screen
        pane.keys("C-d")
        pane.wait_for(r"left session")
    assert not (workspace / "one.txt").exists() and not (workspace / "two.txt").exists()


def test_a_result_kept_as_a_blob_does_not_count_the_excerpts_lines_as_the_outputs(cli: StrataCLI, workspace: Path,
                                                                                  tmp_path: Path) -> None:
    """20,000 lines of output are kept whole as a blob and the model sees an excerpt: the block gives the whole
    size and /show, never the excerpt's line count as if it were the output's ("1755 lines", "1749 more")."""
    tmux = TMUX.require()
    script = write_script(tmp_path / "turns.json", [[tool_use("toolu_big", "bash", command="seq 1 20000")],
                                                    [text("done")]])
    env = {**cli.env(), "TERM": "xterm-256color"}
    argv = cli.argv(["chat", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash"])
    with tmux_pane(tmux, argv, cwd=cli.cwd, env=env, width=WIDTH, height=40) as pane:
        pane.wait_for(r"^strata>")
        pane.type("count")
        pane.wait_for(r"assistant: done")
        screen = pane.screen()
        assert re.search(r"<- bash ok \(\d+\.\d KiB, \d+\.\d s\)", screen), screen
        assert re.search(r"… more, \d+\.\d KiB in all \(the whole output is kept as a blob\): /show toolu_big",
                         screen), screen
        assert not re.search(r"\d+ (more )?lines", screen), screen
        pane.type("/show toolu_big")
        pane.wait_for(r"^20000$")
        pane.keys("C-d")
        pane.wait_for(r"left session")
