"""Rich consoles that show text inert: the sanitiser itself is core/terminal_text.py (one for every terminal
surface); this is where rich, which lives in agent/ only, meets it."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.segment import Segment

from core.terminal_text import json_line, json_text, safe_text

__all__ = ["SafeConsole", "json_line", "json_text", "safe_text"]


class SafeConsole(Console):
    """A rich Console that sanitises the text of every segment it writes (not its own control segments and
    styles): whatever reaches it, from a model or a tool, is shown inert. Callers still pass sanitised text where
    they can, so that widths are measured on what is shown."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(safe_text(segment.text), segment.style, None)
            for segment in buffer)
