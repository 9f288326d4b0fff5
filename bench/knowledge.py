"""The knowledge index at scale: 10,000 generated documents (~50 MB) in one dataset.

Writes the documents as files (Markdown with a heading per ~1 KB and front-matter on every tenth, words drawn from a
Zipf-like vocabulary of 30,000 made-up words so that some are near-universal and most are rare), then times:

    read + hash the corpus (load_corpus), build the FTS5 index (KnowledgeIndex.rebuild),
    and search/get through KnowledgeService (the tools' path): p50 and p95 over many queries of 1-3 words,
    drawn from mid-frequency and rare words, plus a few common-word queries (weak matches).

Targets: build < 10 s, query p50 < 20 ms. Ends with one line:

    knowledge_build_s=<float> knowledge_query_p50_ms=<float>

Usage: python bench/knowledge.py [--docs N] [--doc-bytes B] [--queries Q]
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from core.knowledge import DatasetGrant, Hits
from memory.knowledge import KnowledgeIndex, KnowledgeService, load_corpus

VOCABULARY = 30_000


def words(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    seen: dict[str, None] = {}
    while len(seen) < VOCABULARY:
        seen.setdefault("".join(rng.choice(letters) for _ in range(rng.randint(3, 11))), None)
    return list(seen)


def write_corpus(root: Path, docs: int, doc_bytes: int, rng: random.Random, vocab: list[str]) -> int:
    cumulative = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(vocab))))
    total = 0
    for number in range(docs):
        parts: list[str] = []
        if number % 10 == 0:
            parts.append(f"---\nid: sop-{number:05d}\ntags: [ops, generated]\n---\n")
        size = 0
        while size < doc_bytes:
            heading = " ".join(rng.choices(vocab, cum_weights=cumulative, k=4))
            body = " ".join(rng.choices(vocab, cum_weights=cumulative, k=140))
            block = f"# {heading}\n\n{body}\n\n"
            parts.append(block)
            size += len(block)
        data = "".join(parts).encode("utf-8")
        sub = root / f"group-{number // 500:02d}"
        sub.mkdir(exist_ok=True)
        (sub / f"doc-{number:05d}.md").write_bytes(data)
        total += len(data)
    return total


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--doc-bytes", type=int, default=4_200)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    rng = random.Random(12)
    vocab = words(rng)
    with tempfile.TemporaryDirectory(prefix="strata-knowledge-bench-") as tmp:
        root, home = Path(tmp) / "ops", Path(tmp) / "home"
        root.mkdir()
        started = time.perf_counter()
        total = write_corpus(root, args.docs, args.doc_bytes, rng, vocab)
        print(f"generated {args.docs} documents, {total / 1e6:.1f} MB in {time.perf_counter() - started:.1f} s")

        started = time.perf_counter()
        corpus = load_corpus({"ops": (root,)})
        loaded = time.perf_counter() - started
        index = KnowledgeIndex(home, corpus)
        report = index.rebuild()
        build = loaded + report.seconds
        size = report.path.stat().st_size
        print(f"read + hash corpus: {loaded:.2f} s ({len(corpus.manifest.documents)} documents, "
              f"{len(corpus.manifest.problems)} problems)")
        print(f"build FTS5 index:   {report.seconds:.2f} s ({size / 1e6:.1f} MB on disk)")
        print(f"build total:        {build:.2f} s (target < 10 s)")

        grants = {"ops": DatasetGrant(name="ops", pii="internal", modes=("headless",), source="bench")}
        service = KnowledgeService(grants=grants, index=KnowledgeIndex(home, corpus), common_term_share=0.25)
        pool = vocab[200:20_000]
        timings: list[float] = []
        hits = 0
        for _ in range(args.queries):
            query = " ".join(rng.sample(pool, rng.randint(1, 3)))
            t0 = time.perf_counter()
            answer = service.search(query, mode="headless")
            timings.append((time.perf_counter() - t0) * 1000)
            hits += isinstance(answer, Hits)
        weak = []
        for query in (" ".join(vocab[:3]), vocab[0], " ".join(vocab[1:6])):
            t0 = time.perf_counter()
            answer = service.search(query, mode="headless")
            weak.append((time.perf_counter() - t0) * 1000)
            assert not isinstance(answer, Hits), "a near-universal query must be a weak match"
        gets = []
        for number in rng.sample(range(args.docs), 100):
            doc_id = f"sop-{number:05d}" if number % 10 == 0 else f"group-{number // 500:02d}/doc-{number:05d}.md"
            t0 = time.perf_counter()
            answer = service.get(doc_id, mode="headless")
            gets.append((time.perf_counter() - t0) * 1000)
            assert isinstance(answer, Hits), doc_id
        p50, p95 = statistics.median(timings), percentile(timings, 0.95)
        print(f"search ({args.queries} queries of 1-3 words, {hits} with hits): p50 {p50:.1f} ms, p95 {p95:.1f} ms "
              "(target p50 < 20 ms)")
        print(f"search, near-universal words (weak match): {', '.join(f'{w:.1f}' for w in weak)} ms")
        print(f"get by id (100): p50 {statistics.median(gets):.2f} ms, p95 {percentile(gets, 0.95):.2f} ms")
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"knowledge_build_s={build:.3f} knowledge_query_p50_ms={p50:.3f}")


if __name__ == "__main__":
    main()
