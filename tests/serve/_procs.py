"""Real processes for the daemon's acceptance tests: `strata serve --foreground` and `strata attach --json`
subprocesses on one Strata home, talking over the real socket. Every wait is on a condition (a line printed, a
process ended), never a fixed sleep."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from tests.cli._helpers import assert_clean_stderr, text, tool_use
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient

Line = dict[str, Any]


class _Lines:
    """A process's stdout, line by line, read by a thread; everything seen is kept."""

    def __init__(self, proc: subprocess.Popen[str], parse: Callable[[str], Any]) -> None:
        self.seen: list[Any] = []
        self._queue: queue.Queue[Any] = queue.Queue()
        self._parse = parse
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            if raw.strip():
                self._queue.put(self._parse(raw))
        self._queue.put(StopIteration)

    def wait_for(self, accept: Callable[[Any], bool], timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {what} within {timeout:g} s; seen: {_brief(self.seen)}") from None
            if item is StopIteration:
                self._queue.put(StopIteration)
                raise AssertionError(f"the output ended before {what}; seen: {_brief(self.seen)}")
            self.seen.append(item)
            if accept(item):
                return item

    def rest(self, timeout: float = 30) -> list[Any]:
        """Everything until the output ends."""
        self._thread.join(timeout)
        while not self._queue.empty():
            item = self._queue.get()
            if item is not StopIteration:
                self.seen.append(item)
        return self.seen


def _brief(seen: list[Any], last: int = 12, width: int = 300) -> str:
    """What a client printed, for a failure message: how many lines, and the last few, each cut (a turn can
    carry megabytes of text, which would bury the reason)."""
    shown = [r if len(r := repr(item)) <= width else f"{r[:width]}... ({len(r)} chars)" for item in seen[-last:]]
    return f"{len(seen)} line(s), the last {len(shown)}: [{', '.join(shown)}]"


def _end(proc: subprocess.Popen[str], out: _Lines, timeout: float) -> tuple[float, str]:
    """Wait for `proc` (killed if it overstays, the timeout then raised), read the rest of its output and close its
    pipes: when it exited, and what it wrote on stderr."""
    try:
        proc.wait(timeout)
        exited_at = time.monotonic()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        out.rest()
        assert proc.stdout is not None and proc.stderr is not None
        err = proc.stderr.read()
        for pipe in (proc.stderr, proc.stdout, proc.stdin):
            if pipe is not None and not pipe.closed:
                pipe.close()
    return exited_at, err


class Daemon:
    """`strata serve --foreground`, ready once it printed where it listens."""

    def __init__(self, cli: StrataCLI, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(cli.argv(["serve", "--foreground", *args]), cwd=cli.cwd, env=cli.env(env),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out = _Lines(self.proc, str)
        self.pid = self.proc.pid
        self.stderr = ""
        self.exited_at: float | None = None
        try:
            self.out.wait_for(lambda line: "listening on" in line, 60, "listening line")
        except AssertionError:  # it never listened: ended (or killed after the wait), its pipes closed
            if self.proc.poll() is None:
                self.proc.kill()
            self.wait(5)
            raise

    def signal(self, signum: signal.Signals) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float = 60) -> int:
        self.exited_at, self.stderr = _end(self.proc, self.out, timeout)
        return self.proc.returncode

    def stop(self) -> None:
        """SIGTERM if it still runs; and, whether it did or had already ended (killed by the test, say), its pipes
        are closed: a daemon killed and then only `stop`ped left two open pipes, which the garbage collector closed
        later with a ResourceWarning in whatever test was running then (filterwarnings=error: its failure)."""
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
        assert self.proc.stdout is not None
        if not self.proc.stdout.closed:
            self.wait()


@contextmanager
def serving(cli: StrataCLI, *args: str, env: dict[str, str] | None = None) -> Iterator[Daemon]:
    """`Daemon(cli, *args, env=env)` while the block runs, stopped after it (SIGTERM); it exited 0, unless the block
    failed."""
    daemon = Daemon(cli, *args, env=env)
    try:
        yield daemon
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr


class Client:
    """`strata attach ... --json`: JSON lines in on stdin, out on stdout."""

    def __init__(self, cli: StrataCLI, *args: str) -> None:
        self.proc = subprocess.Popen(cli.argv(["attach", *args, "--json"]), cwd=cli.cwd, env=cli.env(),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.out = _Lines(self.proc, json.loads)
        try:
            attached = self.out.wait_for(lambda o: o["type"] == "attached", 60, "attached line")
        except AssertionError:  # refused (or killed after the wait): its pipes closed, not left to the collector
            if self.proc.poll() is None:
                self.proc.kill()
            _end(self.proc, self.out, 5)
            raise
        self.session_id: str = attached["session_id"]

    def send(self, **obj: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(obj) + "\n")
        self.proc.stdin.flush()

    def wait_for(self, kind: str, timeout: float = 60, **fields: Any) -> Line:
        return self.out.wait_for(  # type: ignore[no-any-return]
            lambda o: o["type"] == kind and all(o.get(k) == v for k, v in fields.items()), timeout,
            f"{kind} {fields or ''}")

    def events(self) -> list[Line]:
        return [o for o in self.out.seen if o["type"] == "event"]

    def finish(self, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Close stdin (the client detaches once its turn ended) and collect what it printed."""
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        return self.collect(timeout)

    def collect(self, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        self.exited_at, err = _end(self.proc, self.out, timeout)
        proc = subprocess.CompletedProcess(self.proc.args, self.proc.returncode, "", err)
        assert_clean_stderr(proc)
        return proc

    def kill(self) -> None:
        self.proc.kill()
        self.collect()


def prompted(cli: StrataCLI, ws: Path, path: Path, prompt: str) -> Client:
    """The driver of a new session in `ws` on the scripted model at `path`, its first prompt sent."""
    client = Client(cli, "--new", "--workspace", str(ws), "--model", f"script:{path}")
    client.send(type="prompt", text=prompt)
    return client


def status(cli: StrataCLI) -> list[Line]:
    proc = cli.run("serve", "--status", "--json")
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def status_in_process(cli: StrataCLI) -> list[Line]:
    """`status(cli)` read in this process (tests/_in_process_cli.py), for the polls of a wait: a `strata serve
    --status` process per poll cost ~0.5 s of CPU and as much wall time before the wait saw its condition. The
    command as a process of its own is what `status` runs, and the tests that read the table check it."""
    from tests._in_process_cli import json_lines_in_process

    return json_lines_in_process(cli, "serve", "--status", "--json")


def lease_owner(cli: StrataCLI, sid: str) -> object:
    """The session's lease holder as `strata sessions --json` shows it (None when nobody holds it), read in this
    process (tests/_in_process_cli.py): the tests poll it every 50 ms while a daemon lets a lease go, and a `strata
    sessions` process per poll cost ~0.1 s of CPU each."""
    from tests._in_process_cli import json_lines_in_process

    (row,) = [r for r in json_lines_in_process(cli, "sessions", "--json") if r["id"] == sid]
    return row["lease_owner"]


def kill_if_running(proc: subprocess.Popen[str] | None) -> None:
    """A test's helper process that may still run when the test fails: killed and reaped."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.communicate()


def wait_until(condition: Callable[[], bool], timeout: float = 30, what: str = "condition") -> None:
    """Poll what nothing can signal (a file a command writes, another process's view of the store)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s")
        time.sleep(0.05)


def script(path: Path, *turns: list[dict[str, Any]]) -> str:
    path.write_text(json.dumps(list(turns)), encoding="utf-8")
    return f"script:{path}"


def allow_in_user_config(cli: StrataCLI, *tools: str) -> None:
    """Policy rules of the user's config file: the daemon's sessions apply them as `strata run` does."""
    path = cli.home / "xdg-config" / "strata" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f'[[policy.rules]]\ntool = "{t}"\naction = "allow"\n\n' for t in tools))


def parked_session(cli: StrataCLI, ws: Path, model: str, *, asked: str, parks: tuple[str, ...] | None = None,
                   prompt: str = "go", leave: Literal["kill", "detach"] = "kill") -> str:
    """With a daemon serving: a driver starts a new session in `ws` on `model`, prompts, is asked about the call
    `asked`, and leaves while the call waits (`leave="kill"`: SIGKILLed; `"detach"`: its stdin ends, it detaches
    and exits 0). Returns the session's id once the daemon's status lists exactly the calls `parks` (default: the
    one asked) as the session's waiting calls, every one parked."""
    expected = sorted((call_id, "parked") for call_id in (parks or (asked,)))
    driver = Client(cli, "--new", "--workspace", str(ws), "--model", model)
    driver.send(type="prompt", text=prompt)
    driver.wait_for("approval_request", call_id=asked)
    if leave == "kill":
        driver.kill()
    else:
        assert driver.finish().returncode == 0

    def waiting() -> list[tuple[str, str]]:
        rows = [row for row in status_in_process(cli) if row.get("session_id") == driver.session_id]
        return sorted((w["call_id"], w["how"]) for row in rows for w in row["waiting"])

    wait_until(lambda: waiting() == expected, what=f"the session's waiting calls to be {expected}")
    return driver.session_id


def killed_while_asking(cli: StrataCLI, ws: Path, model: str, *, asked: str, prompt: str) -> str:
    """A daemon serving a new session in `ws` on `model` is SIGKILLed while its driver is asked about the call
    `asked` (the driver then ends, exit 1). Returns the session's id."""
    daemon = Daemon(cli)
    try:
        driver = Client(cli, "--new", "--workspace", str(ws), "--model", model)
        driver.send(type="prompt", text=prompt)
        driver.wait_for("approval_request", call_id=asked)
        daemon.signal(signal.SIGKILL)
        assert daemon.wait() == -signal.SIGKILL
        assert driver.collect().returncode == 1
    finally:
        daemon.stop()
    return driver.session_id


class Watched:
    """A daemon serving a new session whose driver ran one prompt to its end (`driver`, still attached), watched by
    raw clients attached with role watch (`watchers`)."""

    def __init__(self, daemon: Daemon, driver: Client, watchers: list[RawClient]) -> None:
        self.daemon = daemon
        self.driver = driver
        self.session_id = driver.session_id
        self.watchers = watchers


@contextmanager
def watched_session(cli: StrataCLI, tmp_path: Path, *turns: list[dict[str, Any]],
                    watchers: int = 2) -> Iterator[Watched]:
    """A daemon (`strata serve --foreground`), a driver that starts a session in `tmp_path/ws` on the scripted
    `turns`, `watchers` watch connections attached to it before the driver prompts, and the driver's first turn
    completed. On the way out the watchers are closed and the daemon stopped; it must have exited 0."""
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", *turns)
    daemon = Daemon(cli)
    clients: list[RawClient] = []
    try:
        driver = Client(cli, "--new", "--workspace", str(ws), "--model", model)
        for k in range(watchers):
            clients.append(watcher := RawClient(cli.home / "run" / "daemon.sock", timeout=30))
            watcher.hello()
            attach = {"type": "attach", "id": f"w{k}", "session_id": driver.session_id, "role": "watch"}
            assert watcher.ask(attach)["type"] == "ok"
        driver.send(type="prompt", text="hi")
        assert driver.wait_for("result")["status"] == "completed"
        yield Watched(daemon, driver, clients)
    finally:
        for watcher in clients:
            watcher.close()
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr


def notices_until(client: RawClient, kind: str) -> list[Line]:
    """The notices `client` gets up to and including the first of `kind` (the connection must not end first)."""
    notices = []
    while (line := client.line()) is not None:
        if line["type"] == "notice":
            notices.append(line)
            if line["kind"] == kind:
                return notices
    raise AssertionError(f"the connection ended before a {kind} notice; notices: {notices}")


def child_writes_c(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace, and a script whose parent delegates one task and whose child writes c.txt (an asked call)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    path = tmp_path / "s.json"
    path.write_text(json.dumps({
        "turns": [[tool_use("p1", "delegate", task="write c.txt")], [text("parent done")]],
        "children": [[[tool_use("c1", "write_file", path="c.txt", content="c\n")], [text("child wrote c.txt")]]],
    }), encoding="utf-8")
    return ws, path
