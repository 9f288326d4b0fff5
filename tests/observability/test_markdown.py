"""The HTML export's Markdown (observability/export/_markdown.py) and what the page shows with it: emphasis,
lists, code fences and headings drawn as HTML; everything else, raw HTML and link targets included, escaped as
text, never dropped; the person's prompts in the turn cards; a title cut from a longer prompt ending with an
ellipsis."""

from __future__ import annotations

import re
from html import unescape

from core.events import AssistantMessage, BatchCompleted, SessionEnded, SessionStarted, TurnVerified, UserMessage
from core.messages import TextBlock
from memory import InMemoryEventStore, SessionRecord, Write
from observability.export import render_html
from observability.export._markdown import render_markdown
from tests.observability._export_session import (
    HOSTILE,
    T0,
    ManualClock,
    attempt,
    batch,
    call_row,
    lifecycle,
    masker,
    planned,
    result,
    snapshot_of,
)

ANSWER = """## Result

The build **failed** at *link time*; see `build.log`:

- missing symbol `foo`
- 2 warnings

1. fix the header
2. rebuild

```python
if a < b and c > d:
    print("x & y")
```

> quoted *note*

More at [the docs](https://example.org/docs?a=1&b=2)."""


def _text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", " ", html))


def test_emphasis_lists_headings_and_fences_are_drawn() -> None:
    html = render_markdown(ANSWER)
    assert "<strong>failed</strong>" in html and "<em>link time</em>" in html and "<code>build.log</code>" in html
    assert "<ul><li>missing symbol <code>foo</code></li><li>2 warnings</li></ul>" in html
    assert "<ol><li>fix the header</li><li>rebuild</li></ol>" in html
    assert '<h5 class="md-h">Result</h5>' in html
    assert ('<pre class="md-code"><code class="language-python">if a &lt; b and c &gt; d:\n'
            '    print(&quot;x &amp; y&quot;)</code></pre>') in html
    assert "<blockquote><p>quoted <em>note</em></p></blockquote>" in html
    assert "**" not in html and "```" not in html


def test_raw_html_and_link_targets_stay_text() -> None:
    html = render_markdown(f"{HOSTILE} and [click](javascript:alert(1)) and [ok](https://e.org/?a=1&b=2)\n"
                           '<a href="https://evil">x</a> **<b>bold</b>**')
    assert "<script" not in html and "<img" not in html and "<a " not in html and "<b>" not in html
    assert "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    assert not re.search(r"<[^>]*href", html)  # no anchor: a target is shown as text
    assert '<span class="md-url">(https://e.org/?a=1&amp;b=2)</span>' in html
    assert "<strong>&lt;b&gt;bold&lt;/b&gt;</strong>" in html


def test_nothing_of_the_source_is_dropped() -> None:
    source = ANSWER + "\n\n* stray star, _under_score_ snake_case_name 2*3*4 [not a link] `unclosed\n\n---\n"
    shown = _text(render_markdown(source))
    for word in re.findall(r"[A-Za-z0-9]+", source.replace("```python", "```")):  # a fence's language: a class
        assert word in shown, word


def test_plain_text_is_one_escaped_paragraph() -> None:
    assert render_markdown("a < b & c") == "<p>a &lt; b &amp; c</p>"
    assert render_markdown("") == ""


LONG_PROMPT = ("Please look at the nightly build log in this workspace and tell me what failed, why it failed, and "
               "what to change")


async def _answered() -> InMemoryEventStore:
    clock = ManualClock(T0)
    store = InMemoryEventStore(clock=clock)
    c1 = planned("c1", "read_file", path="build.log")
    started = SessionStarted(session_id="s-md", mode="headless", workspace="/ws", model="script:/x/turns.json",
                             max_turns=5, plan_digest="p")
    record = SessionRecord(id="s-md", created_at=T0, updated_at=T0, mode="headless", workspace="/ws",
                           model="script:/x/turns.json", title=LONG_PROMPT[:80].rsplit(" ", 1)[0], status="active")
    await store.create_session(record, Write(events=[(started, 0), (UserMessage(text=LONG_PROMPT), 0)]))
    clock.advance(milliseconds=20)
    await store.commit("s-md", Write(events=[(batch("b1", "Reading **the log**.", c1), 1)],
                                     timeline=[attempt(1, "ok", 0.0)]))
    clock.advance(milliseconds=3)
    await store.commit("s-md", Write(
        events=[(result("b1", c1, "ok", "error: foo", ms=1.5), 1), (BatchCompleted(batch_id="b1"), 1)],
        timeline=[call_row(1, c1, "allowed", "ok", ms=1.5)]))
    clock.advance(milliseconds=2)
    await store.commit("s-md", Write(
        events=[(AssistantMessage(content=(TextBlock(text=ANSWER),)), 2), (TurnVerified(), 2),
                (UserMessage(text="and the *warnings*?"), 2)],
        timeline=[attempt(2, "ok", 0.0)]))
    clock.advance(milliseconds=2)
    await store.commit("s-md", Write(
        events=[(AssistantMessage(content=(TextBlock(text="None **serious**."),)), 3), (TurnVerified(), 3),
                (SessionEnded(status="completed"), 3)],
        status="completed", timeline=[attempt(3, "ok", 0.0), lifecycle(3, "ended", "session completed")]))
    return store


async def test_turn_cards_show_the_prompts_and_render_the_answers() -> None:
    page = render_html(await snapshot_of(await _answered(), "s-md"), masker())
    cards = {n: block for n, block in re.findall(r'<div class="turn-block" id="turn-(\d+)">(.*?)(?=<div class="turn-'
                                                 r'block"|</section>)', page, re.S)}
    assert LONG_PROMPT in _text(cards["1"]) and '<div class="prompt">' in cards["1"]
    assert "<strong>the log</strong>" in cards["1"]
    assert "<strong>failed</strong>" in cards["2"] and 'class="language-python"' in cards["2"]
    assert '<div class="prompt">' not in cards["2"]
    assert "and the *warnings*?" in _text(cards["3"])  # a prompt is shown as typed, not as Markdown
    assert "<strong>serious</strong>" in cards["3"]


async def test_a_title_cut_from_a_longer_prompt_ends_with_an_ellipsis() -> None:
    page = render_html(await snapshot_of(await _answered(), "s-md"), masker())
    (h1,) = re.findall(r"<h1>(.*?)</h1>", page)
    assert unescape(h1) == LONG_PROMPT[:80].rsplit(" ", 1)[0] + "\u2026"
