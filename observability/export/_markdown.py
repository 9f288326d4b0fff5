"""A small, safe Markdown renderer for the HTML export: what a model's answer usually holds (paragraphs, ATX
headings, bullet and numbered lists, fenced code blocks, block quotes, horizontal rules, and inline code, bold,
italic and links), drawn as HTML.

Safe by construction: every piece of text is HTML-escaped before any tag is put around it, raw HTML in the source
is shown as text, and a link is shown as its text and its target, never as an anchor (the page links nowhere but
to itself). Input it does not understand is shown as text, never dropped."""

from __future__ import annotations

import re
from html import escape

from core.terminal_text import visible_controls

__all__ = ["render_markdown"]

_FENCE = re.compile(r"^(\s{0,3})(`{3,}|~{3,})\s*([\w+#.-]*)\s*$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s{0,3}[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^\s{0,3}(\d{1,9})[.)]\s+(.*)$")
_QUOTE = re.compile(r"^\s{0,3}>\s?(.*)$")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_INLINE = re.compile(
    r"(?P<code>`+)(?P<code_text>.+?)(?P=code)"
    r"|\[(?P<link_text>[^\]\n]+)\]\((?P<link_url>[^)\s]+)\)"
    r"|(?P<strong>\*\*|__)(?P<strong_text>\S(?:.*?\S)?)(?P=strong)"
    r"|(?<![\w*])(?P<em>\*|_)(?P<em_text>[^\s*_](?:[^*_]*?[^\s*_])?)(?P=em)(?![\w*])"
)


def _e(text: str) -> str:
    return escape(visible_controls(text), quote=True)


def _inline(text: str) -> str:
    """One line's inline markup; everything else escaped."""
    out: list[str] = []
    pos = 0
    for m in _INLINE.finditer(text):
        out.append(_e(text[pos:m.start()]))
        pos = m.end()
        if m.group("code"):
            out.append(f"<code>{_e(m.group('code_text').strip())}</code>")
        elif m.group("link_text") is not None:
            label, url = m.group("link_text"), m.group("link_url")
            out.append(f'<span class="md-link">{_inline(label)}</span> <span class="md-url">({_e(url)})</span>')
        elif m.group("strong"):
            out.append(f"<strong>{_inline(m.group('strong_text'))}</strong>")
        else:
            out.append(f"<em>{_inline(m.group('em_text'))}</em>")
    out.append(_e(text[pos:]))
    return "".join(out)


def _paragraph(lines: list[str]) -> str:
    return "<p>" + "<br>".join(_inline(line.strip()) for line in lines) + "</p>"


def render_markdown(source: str) -> str:
    """`source` (already masked) as HTML; every character of it escaped."""
    lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[str] = []
    para: list[str] = []
    i = 0

    def flush() -> None:
        if para:
            out.append(_paragraph(para))
            para.clear()

    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush()
            marker, lang = fence.group(2), fence.group(3)
            body: list[str] = []
            i += 1
            while i < len(lines) and not (lines[i].strip().startswith(marker[0] * len(marker))
                                          and not lines[i].strip().strip(marker[0])):
                body.append(lines[i])
                i += 1
            i += 1  # the closing fence (or the end)
            cls = f' class="language-{_e(lang)}"' if lang else ""
            out.append(f'<pre class="md-code"><code{cls}>{_e(chr(10).join(body))}</code></pre>')
            continue
        if not line.strip():
            flush()
            i += 1
            continue
        if _RULE.match(line):
            flush()
            out.append("<hr>")
            i += 1
            continue
        heading = _HEADING.match(line)
        if heading:
            flush()
            level = min(6, len(heading.group(1)) + 3)  # inside a turn card: h4 and smaller
            out.append(f"<h{level} class=\"md-h\">{_inline(heading.group(2))}</h{level}>")
            i += 1
            continue
        if _QUOTE.match(line):
            flush()
            quoted = []
            while i < len(lines) and (m := _QUOTE.match(lines[i])):
                quoted.append(m.group(1))
                i += 1
            out.append(f"<blockquote>{render_markdown(chr(10).join(quoted))}</blockquote>")
            continue
        for pattern, tag in ((_BULLET, "ul"), (_NUMBERED, "ol")):
            if pattern.match(line):
                flush()
                items: list[str] = []
                while i < len(lines) and (m := pattern.match(lines[i])):
                    items.append(m.group(m.lastindex or 1))
                    i += 1
                    # a continuation line (indented, not a new item) belongs to the item
                    while (i < len(lines) and lines[i].startswith("  ") and lines[i].strip()
                           and not _BULLET.match(lines[i]) and not _NUMBERED.match(lines[i])):
                        items[-1] += " " + lines[i].strip()
                        i += 1
                start = ""
                if tag == "ol":
                    first = _NUMBERED.match(line)
                    if first and first.group(1) != "1":
                        start = f' start="{int(first.group(1))}"'
                out.append(f"<{tag}{start}>" + "".join(f"<li>{_inline(item)}</li>" for item in items) + f"</{tag}>")
                break
        else:
            para.append(line)
            i += 1
    flush()
    return "".join(out)
