"""Well-formed requests with hostile values, against a real `strata serve`: each earns one clear error reply (or is
served as documented), the connection goes on, and nothing reaches the daemon's log as an error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.cli._helpers import bash_mark, effect_counts, marker, text, tool_use
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import Client, Daemon, allow_in_user_config, parked_session, script, status

pytestmark = pytest.mark.slow


def _errors_in_log(cli: StrataCLI) -> list[str]:
    log = cli.home / "logs" / "strata.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [json.loads(x)["event"] for x in lines if '"level": "error"' in x]


@contextmanager
def _raw_client_on_a_new_session(cli: StrataCLI, tmp_path: Path) -> Iterator[tuple[RawClient, str]]:
    """A real daemon, a raw client greeted on it and a new session (a one-answer script); once the test is done the
    daemon stops cleanly: exit 0, no traceback, no error in its log."""
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("hello")])
    daemon = Daemon(cli)
    try:
        client = RawClient(cli.home / "run" / "daemon.sock", timeout=15)
        client.hello()
        made = client.ask({"type": "new_session", "id": "n", "workspace": str(ws), "model": model})
        yield client, made["session_id"]
        client.close()
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert "Traceback" not in daemon.stderr
    assert _errors_in_log(cli) == []


def test_an_attach_with_a_since_seq_no_store_can_hold_is_invalid_and_the_connection_goes_on(
        cli: StrataCLI, tmp_path: Path) -> None:
    with _raw_client_on_a_new_session(cli, tmp_path) as (client, sid):
        for k, seq in enumerate((2**63, 10**30, 2**53 + 1)):
            reply = client.ask({"type": "attach", "id": f"a{k}", "session_id": sid, "since_seq": seq})
            assert (reply["type"], reply["code"], reply["fatal"]) == ("error", "invalid", False), reply
            assert "since_seq" in reply["message"]
        # The same connection attaches as asked, and gets the session's events from its first.
        ok = client.ask({"type": "attach", "id": "ok", "session_id": sid, "since_seq": 1})
        assert (ok["type"], ok["role"]) == ("ok", "drive"), ok
        first = client.line()
        assert first is not None and (first["type"], first["seq"], first["kind"]) == ("event", 1, "session_started")


def test_a_driver_attaching_while_a_watcher_opens_a_parked_session_is_asked_and_the_call_runs_once(
        cli: StrataCLI, tmp_path: Path) -> None:
    """After a restart the parked session is not hosted: a watcher's attach opens it (parked, no lease) and a
    driver's attach, arriving while that open reads the store, joins it. The driver is asked about the parked
    call as if it had come first (it used to be left attached and never asked, its prompts refused)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [bash_mark("b1")], [text("done")])
    daemon = Daemon(cli)
    try:
        sid = parked_session(cli, ws, model, asked="b1", prompt="mark it")
    finally:
        daemon.stop()
    daemon = Daemon(cli)
    try:
        sock = cli.home / "run" / "daemon.sock"
        watcher, driver = RawClient(sock, timeout=30), RawClient(sock, timeout=30)
        watcher.hello()
        driver.hello()
        watcher.send(json.dumps({"type": "attach", "id": "w", "session_id": sid, "role": "watch"}).encode() + b"\n")
        driver.send(json.dumps({"type": "attach", "id": "d", "session_id": sid, "role": "drive"}).encode() + b"\n")
        assert (watcher.line() or {}).get("type") == "ok"
        seen = []
        while not seen or seen[-1]["type"] != "approval_request":
            message = driver.line()
            assert message is not None, f"the connection ended; seen: {seen}"
            seen.append(message)
        asked = seen[-1]
        assert seen[0] == {**seen[0], "type": "ok", "id": "d", "role": "drive"}, seen
        assert asked["call_id"] == "b1"
        approved = driver.ask({"type": "approve", "id": "ap", "session_id": sid, "call_id": "b1",
                               "args_sha256": asked["args_sha256"], "plan_digest": asked["plan_digest"]})
        while approved["type"] != "ok":  # pushes may come before the reply
            approved = driver.line() or {"type": "ended"}
            assert approved["type"] != "ended"
        while (message := driver.line()) is not None and message["type"] != "result":
            pass
        assert message is not None and (message["status"], message["exit_code"]) == ("completed", 0), message
        watcher.close()
        driver.close()
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert effect_counts(ws) == {marker("b1"): 1}
    assert _errors_in_log(cli) == []


def test_a_watcher_behind_by_a_megabyte_loses_a_large_text_delta_but_never_its_connection(
        cli: StrataCLI, tmp_path: Path) -> None:
    """A text delta is best effort: one that would not fit in the client's outbox beside what waits there is
    dropped for that client. It used to be queued whenever the outbox was under half full, and one larger than the
    room left closed the connection of a client that was reading, only not at once."""
    ws = tmp_path / "ws"
    ws.mkdir()
    big = "z" * 3_000_000  # one streamed piece: with about 1 MB waiting, more than the 4 MiB outbox holds
    model = script(tmp_path / "s.json", [text(big)], [text(big)])
    daemon = Daemon(cli)
    try:
        sock = cli.home / "run" / "daemon.sock"
        driver = Client(cli, "--new", "--workspace", str(ws), "--model", model)
        watcher = RawClient(sock, timeout=30)
        watcher.hello()
        attached = watcher.ask({"type": "attach", "id": "w", "session_id": driver.session_id, "role": "watch"})
        assert attached["type"] == "ok", attached
        # The watcher reads nothing while two turns run (well within the daemon's 10 s write timeout).
        for turn in (1, 2):
            driver.send(type="prompt", text=f"turn {turn}")
            result = driver.wait_for("result")
            assert result["status"] == "completed", result
            driver.out.seen.clear()
        seen = []
        while len([m for m in seen if m["type"] == "result"]) < 2:
            message = watcher.line()
            assert message is not None, f"the watcher was disconnected; it got {[m['type'] for m in seen]}"
            seen.append(message)
        kinds = [m["kind"] for m in seen if m["type"] == "event"]
        assert kinds.count("assistant_message") == 2 and kinds.count("user_message") == 2, kinds
        watcher.close()
        assert driver.finish().returncode == 0
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr


def test_attach_json_given_a_second_prompt_while_its_turn_runs_still_waits_for_that_turns_result(
        cli: StrataCLI, tmp_path: Path) -> None:
    """The second prompt is refused (session_busy, one error line); stdin then ends, and the client waits for the
    turn it started, as it does after one prompt. It used to forget that turn and detach at once."""
    ws = tmp_path / "ws"
    ws.mkdir()
    allow_in_user_config(cli, "bash")
    model = script(tmp_path / "s.json", [bash_mark("s1", sleep_before=1.5)], [text("done")])
    daemon = Daemon(cli)
    try:
        client = Client(cli, "--new", "--workspace", str(ws), "--model", model)
        client.send(type="prompt", text="one")
        client.send(type="prompt", text="two")
        finished = client.finish()
        assert finished.returncode == 0, finished.stderr
        kinds = [(o["type"], o.get("code") or o.get("status") or o.get("kind")) for o in client.out.seen]
        assert ("error", "session_busy") in kinds, kinds
        assert kinds[-1] == ("result", "completed") or kinds[-1] == ("notice", "detached"), kinds
        assert ("result", "completed") in kinds, kinds  # printed before it detached
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert effect_counts(ws) == {marker("s1"): 1}


def test_a_client_that_detaches_and_attaches_again_at_once_gets_nothing_of_its_first_attachment_after_the_second(
        cli: StrataCLI, tmp_path: Path) -> None:
    """A detach ends the attachment at once: its `detached` notice is its last message, before the reply. It used
    to be delivered by the attachment's pump whenever that caught up, so a client that attached again while its
    first attachment was still replaying (its outbox half full) got the first one's events, then its `detached`
    notice, after the second attach's `ok`."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    big = "the model says a lot. " * 28_000  # ~600 KB a turn: a replay larger than half the client's outbox
    model = script(tmp_path / "s.json",
                   *[[text(f"{k}: {big}"), tool_use(f"r{k}", "read_file", path="a.txt")] for k in range(8)],
                   [text("done")])
    done = cli.run("run", "--model", model, "--workspace", str(ws), "talk", timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    sid = json.loads(cli.run("sessions", "--json").stdout.splitlines()[0])["id"]
    daemon = Daemon(cli)
    try:
        client = RawClient(cli.home / "run" / "daemon.sock", timeout=30)
        client.hello()
        attach = {"type": "attach", "session_id": sid, "role": "watch", "since_seq": 1}
        seen = [client.ask({**attach, "id": "a1"})]
        while (message := client.line()) is not None and message["type"] != "event":
            seen.append(message)
        assert message is not None
        seen.append(message)  # the replay runs: its pump now waits for the client, who reads nothing more yet
        client.send(json.dumps({"type": "detach", "id": "d1", "session_id": sid}).encode() + b"\n")
        client.send(json.dumps({**attach, "id": "a2"}).encode() + b"\n")
        while not (seen and seen[-1]["type"] == "event" and seen[-1]["kind"] == "session_ended"
                   and any(m.get("id") == "a2" for m in seen)):
            message = client.line()
            assert message is not None, f"the connection ended after {len(seen)} messages"
            seen.append(message)
        replies = {m["id"]: m["type"] for m in seen if m["type"] in ("ok", "error")}
        assert replies == {"a1": "ok", "d1": "ok", "a2": "ok"}, replies
        second = next(k for k, m in enumerate(seen) if m.get("id") == "a2")
        after = seen[second + 1:]
        assert not [m for m in after if m["type"] == "notice"], [m["type"] for m in after if m["type"] != "event"]
        seqs = [m["seq"] for m in after if m["type"] == "event"]
        assert seqs == list(range(1, len(seqs) + 1)) and seqs, seqs[:20]
        before = seen[:second]
        notices = [m for m in before if m["type"] == "notice"]
        assert [n["kind"] for n in notices] == ["detached"], notices
        client.close()
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr


def test_a_session_id_with_a_nul_byte_is_invalid_on_every_request_and_the_connection_goes_on(
        cli: StrataCLI, tmp_path: Path) -> None:
    """No store can hold a NUL in an id (PostgreSQL's text cannot at all): attach, approve and the like name it as an
    invalid request before any store is asked, and the same connection goes on."""
    with _raw_client_on_a_new_session(cli, tmp_path) as (client, sid):
        for k, request in enumerate(({"type": "attach", "session_id": sid + "\x00"},
                                     {"type": "attach", "session_id": "\x00", "role": "watch"},
                                     {"type": "approve", "session_id": "a\x00b", "call_id": "c1"})):
            reply = client.ask({**request, "id": f"r{k}"})
            assert (reply["type"], reply["code"], reply["fatal"]) == ("error", "invalid", False), reply
            assert "session_id" in reply["message"] and "\n" not in reply["message"], reply
        ok = client.ask({"type": "attach", "id": "ok", "session_id": sid, "since_seq": 1})
        assert (ok["type"], ok["role"]) == ("ok", "drive"), ok


def test_status_stops_listing_a_parked_call_once_another_terminal_decides_it(cli: StrataCLI, tmp_path: Path) -> None:
    """A parked session holds no lease, so `strata approve|deny` record decisions from any terminal; the daemon's
    status lists only the calls still undecided (it used to show both as parked until the session was opened)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [bash_mark("b1"), bash_mark("b2")], [text("done")])
    daemon = Daemon(cli)
    try:
        sid = parked_session(cli, ws, model, asked="b1", parks=("b1", "b2"), prompt="mark both")

        def parked() -> list[str]:
            return sorted(w["call_id"] for row in status(cli) if row.get("session_id") == sid
                          for w in row["waiting"] if w["how"] == "parked")

        approved = cli.run("approve", sid, "b1")
        assert approved.returncode == 0, approved.stderr
        assert parked() == ["b2"]
        denied = cli.run("deny", sid, "b2")
        assert denied.returncode == 0, denied.stderr
        assert parked() == []
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert effect_counts(ws) == {}  # decided, not run: the session runs them when it is resumed or attached
    assert _errors_in_log(cli) == []
