"""Whole process against a peer: 1,000 durably recorded tool turns, Strata and LangGraph side by side.

Strata: `strata run --model script:PATH` in a fresh home, a script of N turns that each call `read_file` on a small
file, then a final answer (every turn's batch and result committed with WAL + synchronous=FULL, the timeline and
receipts written as always). LangGraph: a graph of a model node (a scripted stand-in that proposes the same call N
times, then answers) and LangGraph's prebuilt `ToolNode` running a `read_file` tool, compiled with its SQLite
checkpointer (`langgraph-checkpoint-sqlite`'s `SqliteSaver`, WAL) and invoked with `durability="sync"`, so each
step's checkpoint is written before the next step runs. Both are timed as whole processes (interpreter, imports,
work, exit), alternating, in one run; the last line is

    strata_vs_langgraph=<strata median / langgraph median>

The peer is never a dependency of Strata: it is installed into its own virtualenv (`--peer-venv`, by default
`~/.cache/strata-bench/langgraph-<versions>`) the first time, from PyPI, at the versions pinned below.

Usage: python bench/vs_langgraph.py [--turns N] [--runs R] [--peer-venv DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

PEER = ["langgraph==1.2.24", "langgraph-checkpoint-sqlite==3.1.2"]

PEER_PROGRAM = textwrap.dedent('''
    import sqlite3, sys
    from pathlib import Path
    from typing import Annotated, TypedDict
    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages
    from langgraph.prebuilt import ToolNode

    turns, workspace, db = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]

    @tool
    def read_file(path: str) -> str:
        """Read a file of the workspace."""
        return (workspace / path).read_text()

    class State(TypedDict):
        messages: Annotated[list[AnyMessage], add_messages]

    def model(state: State) -> dict:
        asked = sum(1 for m in state["messages"] if isinstance(m, AIMessage))
        if asked < turns:
            call = {"name": "read_file", "args": {"path": "data.txt"}, "id": f"call_{asked:06d}"}
            return {"messages": [AIMessage(content="", tool_calls=[call])]}
        return {"messages": [AIMessage(content="done")]}

    def route(state: State) -> str:
        return "tools" if state["messages"][-1].tool_calls else END

    graph = StateGraph(State)
    graph.add_node("model", model)
    graph.add_node("tools", ToolNode([read_file]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    conn = sqlite3.connect(db, check_same_thread=False)
    conn.execute("PRAGMA synchronous=FULL")
    app = graph.compile(checkpointer=SqliteSaver(conn))
    out = app.invoke({"messages": [HumanMessage(content="bench")]},
                     {"configurable": {"thread_id": "bench"}, "recursion_limit": 2 * turns + 10},
                     durability="sync")
    assert out["messages"][-1].content == "done"
    tool_results = sum(1 for m in out["messages"] if m.type == "tool")
    assert tool_results == turns, tool_results
    print(tool_results)
''')


def _peer_python(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"installing the peer into {venv} ({', '.join(PEER)}) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PEER], check=True)
    return python


def _strata() -> Path:
    found = Path(sys.executable).parent / "strata"
    if not found.exists():
        raise SystemExit(f"no strata next to {sys.executable}: run this with the project's virtualenv")
    return found


def _time(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--peer-venv", type=Path,
                        default=Path.home() / ".cache" / "strata-bench" / ("langgraph-" + "-".join(
                            p.split("==")[1] for p in PEER)))
    args = parser.parse_args()
    peer = _peer_python(args.peer_venv)
    strata = _strata()
    tmp = Path(tempfile.mkdtemp(prefix="strata-vs-langgraph-"))
    workspace = tmp / "workspace"
    workspace.mkdir()
    (workspace / "data.txt").write_text("a small file\n")
    script = tmp / "turns.json"
    turns = [[{"type": "tool_use", "name": "read_file", "input": {"path": "data.txt"}}]
             for _ in range(args.turns)]
    script.write_text(json.dumps([*turns, [{"type": "text", "text": "done"}]]))
    program = tmp / "peer.py"
    program.write_text(PEER_PROGRAM)
    print(f"{args.turns} tool turns, whole processes, alternating, {args.runs} runs each, in {tmp}")
    ours, theirs = [], []
    for run in range(args.runs):
        home = tmp / f"home{run}"
        env = {**os.environ, "STRATA_HOME": str(home)}
        ours.append(_time([str(strata), "run", "--model", f"script:{script}", "--workspace", str(workspace),
                           "--max-turns", str(args.turns + 5), "bench"], env, tmp))
        db = tmp / f"langgraph{run}.sqlite"
        theirs.append(_time([str(peer), str(program), str(args.turns), str(workspace), str(db)], dict(os.environ),
                            tmp))
        print(f"run {run + 1}: strata {ours[-1]:.2f} s, langgraph {theirs[-1]:.2f} s", flush=True)
    calls = _count_calls(strata, tmp / "home0")
    if calls != args.turns:
        raise SystemExit(f"strata recorded {calls} read_file calls, not {args.turns}")
    a, b = statistics.median(ours), statistics.median(theirs)
    commits = 2 * args.turns + 2  # 2 per read-only batch (bench/loop_overhead.py checks it), the start and the answer
    floor = statistics.median(_commit_floor(commits, tmp / f"floor{k}.db") for k in range(3))
    print(f"strata run:           {a:.2f} s median ({a / args.turns * 1e3:.2f} ms per turn; {calls} calls recorded)")
    print(f"langgraph + SqliteSaver: {b:.2f} s median ({b / args.turns * 1e3:.2f} ms per turn)")
    print(f"the durable commits alone: {commits} raw sqlite3 commits of one row (WAL, synchronous=FULL) take "
          f"{floor:.2f} s = {floor / b:.3f} of langgraph's time; {b * 0.1 - floor:.2f} s would be left for "
          f"everything else at 0.1")
    print(f"strata_vs_langgraph={a / b:.3f}")
    shutil.rmtree(tmp, ignore_errors=True)


def _commit_floor(commits: int, path: Path) -> float:
    """Seconds for `commits` durable commits of one small row each, with plain sqlite3 in WAL with synchronous=FULL
    (what each of Strata's commits costs at the least, before any of its rows or its Python)."""
    import sqlite3

    db = sqlite3.connect(str(path), isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = FULL")
        db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        t0 = time.perf_counter()
        for k in range(commits):
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO t (k, v) VALUES (?, ?)", (k, "x" * 64))
            db.execute("COMMIT")
        return time.perf_counter() - t0
    finally:
        db.close()


def _count_calls(strata: Path, home: Path) -> int:
    """The read_file calls the first Strata run recorded, read back through `strata timeline --json`."""
    env = {**os.environ, "STRATA_HOME": str(home)}
    listed = subprocess.run([str(strata), "sessions", "--json"], env=env, capture_output=True, text=True, check=True)
    session = json.loads(listed.stdout.splitlines()[0])["id"]
    rows = subprocess.run([str(strata), "timeline", session, "--json", "--kind", "call"], env=env,
                          capture_output=True, text=True, check=True)
    return sum(1 for line in rows.stdout.splitlines() if json.loads(line).get("tool") == "read_file")


if __name__ == "__main__":
    main()
