"""Terminal escape injection: model text, tool output, tool arguments, a prompt (a session title) and a config value
carrying OSC 52 (write the clipboard), OSC 8 (a hidden link), DCS, BEL and raw 8-bit C1 controls, and an
endpoint's error message, reach no terminal surface as controls. Real `strata` processes with their output
captured, and `strata chat` in a pty."""

from __future__ import annotations

import io
import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.cli._helpers import assert_clean_stderr, events_of, result_line, text, tool_use
from tests.conftest import StrataCLI, write_script
from tests.wire.messages_server import Fault, MessagesServer

OSC52 = "\x1b]52;c;cHduZWQ=\x07"
OSC8 = "\x1b]8;;https://evil.example/\x1b\\click me\x1b]8;;\x1b\\"
DCS = "\x1bP1$r0m\x1b\\"
C1 = "\x9d0;title\x9c\x9b2J\x85"
BIDI = "\u202eexe.txt\u202c\u2066\u2069\u200e\u200f\u202d\u061c"
HOSTILE = f"a{OSC52}b{OSC8}c{DCS}d{C1}e\x07f\x08g\rh{BIDI}i"
"""Every kind of control an attacker would try, and the bidirectional overrides that make text read as something
else; the letters a..i are the printable text around them."""

Hostile = tuple[StrataCLI, str, dict[str, subprocess.CompletedProcess[str]]]
CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""What must never reach a terminal from text Strata did not produce (newline and tab are fine)."""


def assert_inert(name: str, output: str) -> None:
    hit = CONTROLS.search(output)
    if hit is not None:
        around = output[max(0, hit.start() - 60):hit.start() + 60]
        pytest.fail(f"{name}: raw control {hit.group()!r} at {hit.start()}: {around!r}")


def _script(tmp_path: Path) -> Path:
    return write_script(tmp_path / "turns.json", [
        [text(f"look: {HOSTILE}"), tool_use("toolu_w", "write_file", path="evil.txt", content=HOSTILE),
         tool_use("toolu_r", "read_file", path="evil.txt")],
        [text(f"done {HOSTILE}")],
        [text(f"again {HOSTILE}")],
    ])


def _json_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _json_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _json_strings(v)]
    return []


# One module fixture plays dozens of strata processes before the first test: on a loaded 2-core machine that
# alone can pass the suite's 120 s per-test limit, so this module's tests get more (each test's own checks are fast).
pytestmark = pytest.mark.timeout(480)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Hostile:
    base = tmp_path_factory.mktemp("escapes")
    home = base / "home"
    home.mkdir()
    cli = StrataCLI(home, base)
    ws = base / "ws"
    ws.mkdir()
    script = _script(base)
    first = cli.run("run", "--model", f"script:{script}", "--workspace", str(ws), "--allow", "write_file",
                    f"title {HOSTILE}")
    assert first.returncode == 0, first.stderr
    (sid,) = re.findall(r"strata show ([0-9a-f-]{36})", first.stdout)[:1]
    runs = {"run": first,
            "resume": cli.run("resume", sid, f"more {HOSTILE}")}
    # A title and a tool argument that start with a right-to-left override (not cut off the listing's 40 columns).
    bidi_script = write_script(base / "bidi.json", [[tool_use("toolu_b", "read_file", path=f"{BIDI}.md")],
                                                     [text("ok")]])
    bidi = cli.run("run", "--model", f"script:{bidi_script}", "--workspace", str(ws), "--json", f"{BIDI} title")
    bidi_sid = str((result_line(bidi.stdout) or {})["session_id"])
    commands: dict[str, tuple[str, ...]] = {
        "run --json": ("run", "--model", f"script:{script}", "--workspace", str(ws), "--allow", "write_file",
                       "--json", f"json {HOSTILE}"),
        "show": ("show", sid), "show --json": ("show", sid, "--json"),
        "timeline": ("timeline", sid), "timeline --json": ("timeline", sid, "--json"),
        "timeline --follow": ("timeline", sid, "--follow"),
        "timeline --follow --json": ("timeline", sid, "--follow", "--json"),
        "sessions": ("sessions",), "sessions --json": ("sessions", "--json"),
        "receipts": ("receipts", sid), "receipts --json": ("receipts", sid, "--json"),
        "bidi timeline": ("timeline", bidi_sid), "bidi show": ("show", bidi_sid),
        "bidi export html": ("export", bidi_sid, "--format", "html", "--output", str(base / "bidi.html")),
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs.update(zip(commands, pool.map(lambda args: cli.run(*args), commands.values()), strict=True))
    # A config value quoted by an error line, on doctor and on a run.
    bad = base / "bad-ws"
    (bad / ".strata").mkdir(parents=True)
    (bad / ".strata" / "config.toml").write_text(f"max_turns = {json.dumps(HOSTILE)}\n", encoding="utf-8")
    runs["doctor"] = cli.run("doctor", "--workspace", str(bad))
    # A model endpoint's error message, quoted by the one error line of a failed run.
    with MessagesServer(api_key="sk-ant-test-not-a-real-key") as server:
        server.script(Fault(400, message=f"bad request {HOSTILE}"))
        runs["error line"] = cli.run("run", "--model", "anthropic:claude-test", "--workspace", str(ws), "hello",
                                     env={"ANTHROPIC_BASE_URL": server.url,
                                          "ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key"})
    assert runs["error line"].returncode == 1 and "bad request a" in runs["error line"].stderr
    return cli, sid, runs


SURFACES = ["run", "resume", "run --json", "show", "show --json", "timeline", "timeline --json",
            "timeline --follow", "timeline --follow --json", "sessions", "sessions --json", "receipts",
            "receipts --json", "doctor", "error line"]


@pytest.mark.parametrize("surface", SURFACES)
def test_no_control_sequence_reaches_the_terminal(hostile: tuple[StrataCLI, str, dict[str, Any]],
                                                  surface: str) -> None:
    """Whatever the model, a tool, a config file or a model endpoint says, stdout and stderr of every command
    carry no control character but newline and tab: OSC, DCS, BEL, backspace, CR and 8-bit C1 are neutralised."""
    proc = hostile[2][surface]
    assert_clean_stderr(proc)
    assert_inert(f"{surface} stdout", proc.stdout)
    assert_inert(f"{surface} stderr", proc.stderr)


def test_the_text_around_the_controls_is_kept(hostile: tuple[StrataCLI, str, dict[str, Any]]) -> None:
    """Neutralising eats no printable text: the letters between the controls and the link text still show, and
    the clipboard payload is visible as inert text rather than sent to the terminal."""
    runs = hostile[2]
    shown = runs["run"].stdout
    assert "assistant: look: a" in shown
    line = next(line for line in shown.splitlines() if line.startswith("assistant: look:"))
    for piece in ("52;c;cHduZWQ=", "click me", "0;title", "e", "f", "g", "h", "\\u202eexe.txt\\u202c", "i"):
        assert piece in line, (piece, line)
    assert re.search(r"a.*b.*c.*d.*e.*f.*g.*h.*i", line)


@pytest.mark.parametrize("surface", ["sessions", "bidi show", "bidi timeline"])
def test_a_bidi_override_in_a_title_or_a_tool_argument_is_shown_as_its_escape(
        hostile: tuple[StrataCLI, str, dict[str, Any]], surface: str) -> None:
    """The session title `strata sessions` lists (the first prompt), the conversation `show` prints and the call
    summaries of the timeline show a right-to-left override as the text `\\u202e`, in stored order."""
    proc = hostile[2][surface]
    assert proc.returncode == 0, proc.stderr
    assert "\u202e" not in proc.stdout
    assert "\\u202eexe.txt\\u202c" in proc.stdout, proc.stdout


def test_a_bidi_override_in_the_html_export_is_shown_as_its_escape_not_applied(
        hostile: tuple[StrataCLI, str, dict[str, Any]]) -> None:
    """The HTML export (a file a person opens in a browser, where an override reorders text as a terminal does)
    shows the prompt, the call's arguments and its waterfall tip with the override as the text `\\u202e`."""
    cli, _, runs = hostile
    assert runs["bidi export html"].returncode == 0, runs["bidi export html"].stderr
    page = (cli.cwd / "bidi.html").read_text(encoding="utf-8")
    assert "\u202e" not in page and "\u2066" not in page
    assert page.count("\\u202eexe.txt\\u202c") >= 3, page  # the prompt, the call's arguments and its summary
    island = page[page.index('id="strata-data"'):]
    assert "\\\\u202eexe.txt" in island  # the waterfall's tips: the escape as text, not the character


@pytest.mark.parametrize("surface", ["run --json", "show --json", "timeline --json", "timeline --follow --json",
                                     "sessions --json", "receipts --json"])
def test_json_output_is_valid_and_lossless(hostile: tuple[StrataCLI, str, dict[str, Any]], surface: str) -> None:
    """`--json` escapes every control (C1 included) as \\u00XX, so it is inert on a terminal, and a JSON reader
    gets the exact text back."""
    proc = hostile[2][surface]
    assert proc.returncode == 0, proc.stderr
    objects = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert objects
    if surface in ("run --json", "show --json"):
        assert any(HOSTILE in s for obj in objects for s in _json_strings(obj)), surface


def test_chat_neutralises_streamed_text_tool_output_and_the_approval_prompt(cli: StrataCLI, workspace: Path,
                                                                           tmp_path: Path) -> None:
    """In a pty, `strata chat` streams the model's text, shows the approval prompt with the arguments in full, the
    tool output, /timeline and /receipts: none of the attacker's sequences reaches the terminal (the terminal's
    own control sequences, which prompt_toolkit writes, are CSI only)."""
    script = _script(tmp_path)
    child: pexpect.spawn = cli.spawn_pty("chat", "--model", f"script:{script}", "--workspace", str(workspace))
    seen = io.StringIO()
    child.logfile_read = seen
    child.expect("strata>")
    child.sendline("go")
    child.expect("approval needed: write_file")
    child.expect(r"approve\? \[y/n/a\]")
    child.sendline("y")
    child.expect("read_file ok")
    child.expect("done a")
    child.expect("strata>")
    child.sendline("/timeline")
    child.expect("timeline of")
    child.expect("strata>")
    child.sendline("/receipts")
    child.expect("write_file")
    child.expect("strata>")
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    child.close()
    out = seen.getvalue()
    assert "52;c;cHduZWQ=" in out  # the payload was shown, as text
    for intro in ("\x1b]", "\x1bP", "\x1b_", "\x1b^", "\x1bX", "\x07", "\x08"):
        assert intro not in out, (intro, out[max(0, out.find(intro) - 80):out.find(intro) + 80])
    c1 = re.search(r"[\x80-\x9f]", out)
    assert c1 is None, repr(out[max(0, c1.start() - 80):c1.start() + 80])
    assert "g\rh" not in out  # a carriage return that would overwrite the text (the pty's own CR LF is fine)
    # Every ESC left is the start of a CSI sequence (the terminal handling prompt_toolkit and rich do themselves).
    assert re.findall(r"\x1b(?!\[)", out) == []


def test_json_events_of_a_run_hold_the_exact_text(hostile: tuple[StrataCLI, str, dict[str, Any]]) -> None:
    """The state log keeps the model's text exactly; only its display is neutralised."""
    events = events_of(hostile[2]["run --json"].stdout)
    texts = [b["text"] for e in events if e["kind"] == "assistant_message" for b in e["content"]
             if b["type"] == "text"]
    assert f"done {HOSTILE}" in texts
