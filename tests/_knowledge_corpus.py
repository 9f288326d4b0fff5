"""Real public corpora for the knowledge tests: CPython's own documentation shipped inside the interpreter
(`pydoc_data.topics`, one plain-text document per topic, no front-matter, so a document's content is the whole file)
and this project's README split at its headings (one Markdown document per section, each with front-matter giving
it an id and tags)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")


def write_pydoc_topics(root: Path) -> dict[str, Path]:
    """One file `<topic>.txt` per topic, written as UTF-8 bytes; topic -> file."""
    import pydoc_data.topics

    root.mkdir(parents=True, exist_ok=True)
    files = {}
    for topic, text in sorted(pydoc_data.topics.topics.items()):
        path = root / f"{topic}.txt"
        path.write_bytes(text.encode("utf-8"))
        files[topic] = path
    return files


def readme_sections() -> list[tuple[str, str]]:
    """The README cut at its headings (outside code fences): (slug, text) pairs, slugs made unique."""
    sections: list[tuple[str, list[str]]] = []
    fenced = False
    for line in (REPO / "README.md").read_text(encoding="utf-8").splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if match or not sections:
            title = match.group(2) if match else "preamble"
            sections.append((_slug(title), []))
        sections[-1][1].append(line)
    seen: dict[str, int] = {}
    out = []
    for slug, lines in sections:
        seen[slug] = seen.get(slug, 0) + 1
        out.append((slug if seen[slug] == 1 else f"{slug}-{seen[slug]}", "".join(lines)))
    return out


def write_readme_sections(root: Path) -> dict[str, Path]:
    """One file per README section, `NN-slug.md`, with front-matter `id: readme/<slug>` and `tags: [readme]`;
    id -> file."""
    root.mkdir(parents=True, exist_ok=True)
    files = {}
    for number, (slug, text) in enumerate(readme_sections()):
        doc_id = f"readme/{slug}"
        path = root / f"{number:02d}-{slug}.md"
        path.write_bytes(f"---\nid: {doc_id}\ntags: [readme, strata]\n---\n{text}".encode())
        files[doc_id] = path
    return files


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:60] or "section"
