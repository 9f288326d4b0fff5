"""The one terminal sanitiser (agent/terminal/safe_text.py): every control sequence Strata did not produce is made
inert, no printable text is eaten, JSON stays the same JSON; and every CLI surface goes through it."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import click
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.text import Text

from agent.terminal.safe_text import SafeConsole, json_line, json_text, safe_text

AGENT = Path(__file__).resolve().parents[2] / "agent"
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Controls, and the bidirectional formatting characters that reorder what a terminal shows."""


def _unescape(text: str) -> str:
    return re.sub(r"\\x([0-9a-f]{2})|\\u([0-9a-f]{4})", lambda m: chr(int(m.group(1) or m.group(2), 16)), text)


def test_osc_dcs_apc_pm_sos_and_c1_are_shown_not_sent() -> None:
    """ESC-initiated strings and their 8-bit forms keep their text, with the introducer shown as an escape."""
    cases = {
        "\x1b]52;c;cHduZWQ=\x07": "\\x1b]52;c;cHduZWQ=\\x07",
        "\x1b]8;;https://x.example/\x1b\\link\x1b]8;;\x1b\\": "\\x1b]8;;https://x.example/\\x1b\\link\\x1b]8;;\\x1b\\",
        "\x1bP1$r0m\x1b\\": "\\x1bP1$r0m\\x1b\\",
        "\x1b_app\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\": "\\x1b_app\\x1b\\\\x1b^pm\\x1b\\\\x1bXsos\\x1b\\",
        "\x9d0;title\x9c": "\\x9d0;title\\x9c",
        "\x90dcs\x9c\x9fapc\x9c": "\\x90dcs\\x9c\\x9fapc\\x9c",
        "a\x07b\x08c\x7fd\x00e": "a\\x07b\\x08c\\x7fd\\x00e",
        "ESC c resets: \x1bc": "ESC c resets: \\x1bc",
    }
    for raw, shown in cases.items():
        assert safe_text(raw) == shown, raw


def test_bidi_overrides_isolates_and_marks_are_shown_not_applied() -> None:
    """A right-to-left override (the "Trojan Source" trick) and its kin would make a title or a file name read as
    something else: each is shown as its escape, the text around it kept in stored order."""
    assert safe_text("invoice\u202etxt.exe") == "invoice\\u202etxt.exe"
    every = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
    assert safe_text(f"a{every}b") == "a" + "".join(f"\\u{ord(c):04x}" for c in every) + "b"
    assert "\u202e" not in json_line({"title": "x\u202ey"}) and json.loads(json_line({"title": "x\u202ey"})) == {
        "title": "x\u202ey"}
    assert safe_text("שלום עולם, مرحبا") == "שלום עולם, مرحبا"  # right-to-left text itself is left alone


def test_csi_is_dropped_and_line_ends_kept() -> None:
    """Colours and cursor moves (7-bit and 8-bit CSI) are dropped; newline and tab stay; CR LF becomes LF and a
    lone CR is shown (it would overwrite the line)."""
    assert safe_text("\x1b[31mred\x1b[0m \x1b[2J\x1b[1;1H\x9b2Jok") == "red ok"
    assert safe_text("a\tb\nc\r\nd") == "a\tb\nc\nd"
    assert safe_text("rm -rf /\rls") == "rm -rf /\\x0dls"
    assert safe_text("plain text, ünïcödé, 中文, emoji 🎉") == "plain text, ünïcödé, 中文, emoji 🎉"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="\\\x1b\x9b"), max_size=60))
def test_no_control_survives_and_nothing_printable_is_eaten(text: str) -> None:
    """For any text: no control but newline and tab comes out, and (without CSI) the original is exactly what
    the visible escapes stand for."""
    out = safe_text(text)
    assert CONTROL.search(out) is None
    assert _unescape(out) == re.sub(r"\r+\n", "\n", text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60) | st.lists(st.sampled_from(["\x1b[31m", "\x1b[0m", "\x1b[1;2m", "\x9b7m", "\x1b", "[",
                                                        "a", "\n", "é"]), max_size=12).map("".join))
def test_what_the_sanitiser_leaves_has_no_style_for_click_to_strip(text: str) -> None:
    """agent/cli/output.py's `echo` tells click not to strip ANSI styles when the output is not a terminal: no ESC
    survives the sanitiser, so stripping would change nothing (the lines read the same either way)."""
    out = safe_text(text)
    assert "\x1b" not in out
    assert click.unstyle(out) == out


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.integers(0, 40))
def test_text_split_anywhere_is_safe_piece_by_piece(text: str, cut: int) -> None:
    """Streamed text arrives in pieces: each piece alone comes out inert, wherever a sequence was split."""
    for piece in (text[:cut], text[cut:]):
        assert CONTROL.search(safe_text(piece)) is None


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
                    max_leaves=10))
def test_json_lines_are_inert_and_read_back_the_same(value: object) -> None:
    """`--json` output: no raw control (C1 and DEL escaped too), and a JSON reader gets the exact value."""
    line = json_line(value)
    assert CONTROL.search(line) is None
    assert json.loads(line) == value
    assert json.loads(json_text(json.dumps(value, ensure_ascii=False))) == value


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x7F) | st.sampled_from("…é\u202e\u2066\x85\udc80"),
               max_size=80), st.integers(1, 300))
def test_long_text_comes_out_as_the_expressions_leave_it(text: str, lines: int) -> None:
    """core/terminal_text.py checks a long text (a whole table printed at once) for controls without running its
    expression over every character; any text still comes out as the expressions make it."""
    from core import terminal_text

    for sample in (text, "\n".join([text] * lines), f"seq  time\n{text}\t|\n" * lines):
        assert terminal_text._no_control(sample) is (CONTROL.search(sample) is None)
        assert json_text(sample) == CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", sample)
        made = CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) <= 0xFF else f"\\u{ord(m[0]):04x}",
                           re.sub(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]", "", re.sub(r"\r+\n", "\n", sample)))
        assert safe_text(sample) == made


def test_safe_console_keeps_its_own_styles_and_neutralises_the_rest() -> None:
    """With colours on, the console's own SGR codes come out; an OSC in the text, markup or not, does not."""
    out = io.StringIO()
    console = SafeConsole(file=out, force_terminal=True, color_system="standard", width=200)
    console.print("[bold red]denied[/]: \x1b]52;c;eA==\x07 shown", highlight=False)
    console.print(Text("row \x1bP1$r\x1b\\ \x9d0;t\x9c", style="green"))
    console.print("streamed \x1b]8;;u\x1b\\", end="", markup=False)
    written = out.getvalue()
    assert "\x1b]" not in written and "\x1bP" not in written and re.search(r"[\x80-\x9f\x07]", written) is None
    assert re.findall(r"\x1b(?!\[[0-9;]*m)", written) == []  # every ESC left starts one of its colour codes
    assert "\\x1b]52;c;eA==" in written and "denied" in written


def test_every_cli_line_goes_through_the_sanitiser() -> None:
    """No module of the CLI or the terminal prints around it: `click.echo` only in agent/cli/output.py, and
    every rich console is a SafeConsole."""
    offenders = []
    for path in sorted(AGENT.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        rel = path.relative_to(AGENT).as_posix()
        if "click.echo(" in source and rel != "cli/output.py":
            offenders.append(f"{rel}: click.echo")
        if re.search(r"(?<![A-Za-z])Console\(", source) and rel != "terminal/safe_text.py":
            offenders.append(f"{rel}: a plain rich Console")
        if re.search(r"^\s*print\(", source, re.MULTILINE):
            offenders.append(f"{rel}: print")
    assert offenders == []
