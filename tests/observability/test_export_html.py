"""HTML export, read as text and parsed (the page in a real browser is tests/cli/test_export.py): one
self-contained file, every call's details, text escaped, nothing secret, the waterfall's data in its island."""

from __future__ import annotations

import json
import re
from html import unescape
from html.parser import HTMLParser

from observability.export import render_html
from tests.observability._export_session import (
    HOSTILE,
    SECRETS,
    SID,
    build_session,
    finished_session,
    masker,
    snapshot_of,
)


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.island = ""
        self._in_island = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_island = tag == "script" and dict(attrs).get("id") == "strata-data"

    def handle_endtag(self, tag: str) -> None:
        self._in_island = False

    def handle_data(self, data: str) -> None:
        if self._in_island:
            self.island += data


async def page() -> tuple[str, Page]:
    text = render_html(await snapshot_of((await build_session()).store), masker())
    parsed = Page()
    parsed.feed(text)
    parsed.close()
    return text, parsed


async def test_the_page_is_self_contained() -> None:
    """No element loads anything: no src or href to elsewhere, no stylesheet links, no @import or url()."""
    text, parsed = await page()
    for tag, attrs in parsed.tags:
        assert "src" not in attrs, (tag, attrs)
        assert tag != "link", attrs
        href = attrs.get("href")
        assert href is None or href.startswith("#"), (tag, attrs)
    assert "@import" not in text and "url(" not in text
    assert not re.search(r"https?://", text.replace("postgres://", "")), re.findall(r"https?://\S{0,40}", text)
    assert "default-src 'none'" in text  # and the page forbids itself any fetch


async def test_every_call_has_expandable_details() -> None:
    """A <details> per call, in proposal order, with its decision path, arguments and result."""
    text, parsed = await page()
    details = [attrs for tag, attrs in parsed.tags if tag == "details" and "call" in (attrs.get("class") or "")]
    assert [d["data-call-id"] for d in details] == ["c1", "c2", "c3", "c4", "c5", "c7", "c6", "c8"]
    assert [d["class"].split()[1] for d in details] == [
        "cat-allowed", "cat-denied", "cat-allowed", "cat-approved", "cat-unknown", "cat-rejected", "cat-parked",
        "cat-pending"]
    assert text.count("<h4>Decision path</h4>") == 8 and text.count("<h4>Arguments</h4>") == 8
    assert "alice (terminal)" in text and "No result: the call has not run." in text


async def test_summary_shows_the_counts() -> None:
    """The header names the session and shows turns, calls, denials and unknown receipts."""
    text, _ = await page()
    assert SID in text and "awaiting approval" in text
    cards = dict((k, n) for n, k in re.findall(r'<div class="n">([^<]*)</div><div class="k">([^<]*)</div>', text))
    assert cards == {"turns": "3", "tool calls": "6", "denials": "2", "unknown receipts": "1", "model attempts": "4",
                     "tokens in/out": "4500/260"}
    assert "rows verified" in text


async def test_text_is_escaped_everywhere() -> None:
    """Hostile text in arguments and assistant text never becomes markup, in the HTML or in the script island."""
    text, parsed = await page()
    assert HOSTILE not in text
    assert unescape(text).count(HOSTILE) >= 2
    assert [t for t, a in parsed.tags if t == "img"] == []
    assert "</script><img" not in parsed.island
    data = json.loads(parsed.island)
    assert any(HOSTILE in line for row in data["rows"] for line in row["tip"])


async def test_waterfall_data_places_every_call() -> None:
    """The island holds a bar per call within [0, 1], a break for the idle hours, and the lifecycle marks."""
    _, parsed = await page()
    data = json.loads(parsed.island)
    calls = [r for r in data["rows"] if r["kind"] == "call"]
    assert [r["call"] for r in calls] == ["c1", "c2", "c3", "c4", "c5", "c7", "c6", "c8"]
    assert all(0.0 <= r["x0"] <= r["x1"] <= 1.0 for r in data["rows"])
    assert [b["label"] for b in data["breaks"]] == ["idle 3h 00m"]
    assert [m["what"] for m in data["markers"]] == ["started", "resumed", "parked"]


async def test_nothing_secret_is_written() -> None:
    """Secrets are masked before escaping, so neither the markup nor its unescaped text holds them."""
    text, _ = await page()
    for form in (text, unescape(text), text.replace("\\u0026", "&")):
        assert [s for s in SECRETS if s in form] == []


async def test_a_small_session_renders() -> None:
    """A completed one-call session renders with its answer."""
    text = render_html(await snapshot_of(await finished_session(), "s-done"), masker())
    assert "A it is." in text and "completed" in text
