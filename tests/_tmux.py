"""A program in a real terminal, tmux: keys are sent as a person types them and the screen is read back as tmux
shows it, with its colours (`capture-pane -e`), so a test sees what a person sees. Each pane has its own tmux
server (its own socket), killed at the end."""

from __future__ import annotations

import io
import re
import shlex
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.style import Style
from rich.text import Text

SGR = re.compile(r"\x1b\[[0-9;:]*m")


class Pane:
    def __init__(self, tmux: str, socket: str) -> None:
        self.tmux = tmux
        self.socket = socket

    def _run(self, *args: str) -> str:
        return subprocess.run([self.tmux, "-L", self.socket, *args], capture_output=True, text=True, check=True,
                              timeout=10).stdout

    def keys(self, *keys: str) -> None:
        """tmux key names (`Enter`, `C-c`, `C-d`) or text typed as is (`-l`: literal)."""
        for key in keys:
            if re.fullmatch(r"(Enter|Escape|BSpace|Tab|[CM]-[a-z])", key):
                self._run("send-keys", "-t", "main", key)
            else:
                self._run("send-keys", "-t", "main", "-l", key)

    def type(self, line: str) -> None:
        self.keys(line, "Enter")

    def screen(self, colours: bool = False) -> str:
        """What the pane shows now (with `colours`: its SGR sequences too, as tmux renders them)."""
        args = ["capture-pane", "-p", "-t", "main", *(["-e"] if colours else [])]
        return self._run(*args)

    def alive(self) -> bool:
        return "0" in self._run("display-message", "-p", "-t", "main", "#{pane_dead}")

    def final_screen(self, timeout: float = 30) -> str:
        """Everything the program left in the pane once it has ended, lines scrolled off the top included, without
        tmux's own "Pane is dead" line. Read while the program may still run, the screen could lose its top row
        between one read and the next: tmux writes that line on a fresh row at the bottom, scrolling the rest up."""
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() > deadline:
                raise AssertionError(f"the program still runs after {timeout} s\n--- screen ---\n{self.screen()}")
            time.sleep(0.05)
        lines = self._run("capture-pane", "-p", "-t", "main", "-S", "-").splitlines()
        return "\n".join(line for line in lines if not line.startswith("Pane is dead"))

    def wait_for(self, pattern: str, timeout: float = 30, colours: bool = False) -> re.Match[str]:
        """Wait until the screen matches `pattern` (a regex); the match."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen(colours)
            found = re.search(pattern, screen, re.MULTILINE)
            if found:
                return found
            time.sleep(0.1)
        raise AssertionError(f"not on the screen after {timeout} s: {pattern!r}\n--- screen ---\n{screen}")

    def wait_gone(self, pattern: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not re.search(pattern, self.screen(), re.MULTILINE):
                return
            time.sleep(0.1)
        raise AssertionError(f"still on the screen after {timeout} s: {pattern!r}\n{self.screen()}")


@contextmanager
def tmux_pane(tmux: str, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], width: int = 110,
              height: int = 45) -> Iterator[Pane]:
    """`argv` in a fresh tmux server's pane of `width` x `height`; the pane stays after the program ends (so its
    last screen can be read), and the server is killed when the block ends."""
    socket = f"strata-test-{uuid.uuid4().hex[:12]}"
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    command = f"cd {shlex.quote(str(cwd))} && exec env -i {exports} {shlex.join(argv)}"
    subprocess.run([tmux, "-L", socket, "-f", "/dev/null", "new-session", "-d", "-s", "main", "-x", str(width),
                    "-y", str(height), command], check=True, timeout=10)
    pane = Pane(tmux, socket)
    try:
        pane._run("set-option", "-t", "main", "remain-on-exit", "on")
        yield pane
    finally:
        subprocess.run([tmux, "-L", socket, "kill-server"], capture_output=True, timeout=10)


def style_of(screen: str, needle: str) -> Style:
    """The style tmux shows the first character of `needle` in (`screen` captured with colours)."""
    text = Text.from_ansi(screen)
    at = text.plain.find(needle)
    assert at >= 0, f"{needle!r} is not on the screen:\n{text.plain}"
    style = Style()
    for span in text.spans:
        if span.start <= at < span.end:
            style += span.style if isinstance(span.style, Style) else Style.parse(span.style)
    return style


def save_svg(screen: str, path: Path, title: str, width: int) -> None:
    """A captured screen (with colours) as an SVG picture of a terminal."""
    console = Console(record=True, width=width, file=io.StringIO(), force_terminal=True, color_system="truecolor")
    console.print(Text.from_ansi(screen.rstrip("\n")), soft_wrap=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    console.save_svg(str(path), title=title)
