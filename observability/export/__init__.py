"""Exporters: a session as JSONL, as one self-contained HTML page, or as an OTLP/JSON trace. Each reads a
`SessionSnapshot` (loaded through the store) and masks everything it writes with the `Masker` it is given."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from observability.export._html import render_html
from observability.export._jsonl import jsonl_records, render_jsonl
from observability.export._otlp import otlp_document, render_otlp
from observability.export._snapshot import SessionSnapshot, load_snapshot
from observability.export._view import SessionTrace, build_trace

if TYPE_CHECKING:
    from core.masking import Masker

ExportFormat = Literal["jsonl", "html", "otlp"]
RENDERERS: dict[ExportFormat, Callable[[SessionSnapshot, Masker], str]] = {
    "jsonl": render_jsonl,
    "html": render_html,
    "otlp": render_otlp,
}

__all__ = [
    "RENDERERS",
    "ExportFormat",
    "SessionSnapshot",
    "SessionTrace",
    "build_trace",
    "jsonl_records",
    "load_snapshot",
    "otlp_document",
    "render_html",
    "render_jsonl",
    "render_otlp",
]
