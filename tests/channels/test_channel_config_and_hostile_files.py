"""Channel config is checked before the daemon listens (one clear line, exit 2), a project file cannot open a
channel, and a hostile or broken spool file is set aside with its reason while the daemon and the good messages
go on."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from config import load_config
from core.errors import ConfigError
from tests.channels._support import drop, pending, replies, spool_table, write_config
from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until


def _env(cli: StrataCLI) -> dict[str, str]:
    return {"XDG_CONFIG_HOME": str(cli.home / "xdg-config"), "STRATA_HOME": str(cli.home)}


def test_a_spool_channel_without_its_folders_is_a_config_error_naming_the_key(cli: StrataCLI) -> None:
    """A spool channel must name both folders."""
    write_config(cli, '[[channels]]\nname = "x"\nkind = "spool"\nworkspace = "/tmp"\ninbox = "/tmp/in"\n')
    with pytest.raises(ConfigError, match="needs `inbox` and `outbox`"):
        load_config(workspace=None, env=_env(cli))


def test_two_channels_with_one_name_are_a_config_error(cli: StrataCLI, tmp_path: Path) -> None:
    table = spool_table("same", tmp_path, tmp_path, "script:/nowhere")
    write_config(cli, table + table)
    with pytest.raises(ConfigError, match="same name"):
        load_config(workspace=None, env=_env(cli))


def test_a_project_file_cannot_configure_channels_or_daemon_mode(cli: StrataCLI, tmp_path: Path) -> None:
    """A workspace's config never opens a door into the daemon or enables a tool there."""
    project = tmp_path / "proj"
    (project / ".strata").mkdir(parents=True)
    (project / ".strata" / "config.toml").write_text('[daemon]\nenable = ["bash"]\n')
    with pytest.raises(ConfigError, match="cannot configure the daemon"):
        load_config(workspace=project, env=_env(cli))


def test_the_daemon_refuses_to_start_on_a_channel_whose_workspace_is_missing(cli: StrataCLI, tmp_path: Path) -> None:
    write_config(cli, spool_table("ops", tmp_path / "spool", tmp_path / "missing", "script:/nowhere.json"))
    proc = cli.run("serve", "--foreground", timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "channels.ops.workspace" in proc.stderr and "Traceback" not in proc.stderr


def test_a_webhook_token_must_be_in_the_environment(cli: StrataCLI, tmp_path: Path) -> None:
    write_config(cli, f'[[channels]]\nname = "hook"\nkind = "webhook"\nport = 1\ntoken_env = "NO_SUCH_TOKEN"\n'
                 f'workspace = "{tmp_path}"\nmodel = "script:/x.json"\n')
    proc = cli.run("serve", "--foreground", timeout=60)
    assert proc.returncode == 2 and "NO_SUCH_TOKEN" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_broken_and_hostile_spool_files_are_set_aside_with_a_reason_and_the_good_one_is_answered(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    inbox = spool / "in"
    model = script(tmp_path / "s.json", [text("fine")])
    write_config(cli, spool_table("team", spool, ws, model, threads='["support-*"]'))
    inbox.mkdir(parents=True)
    (inbox / "bad.json").write_text("{not json")
    (inbox / "list.json").write_text("[1, 2]")
    (inbox / "huge.json").write_bytes(b'{"thread": "support-1", "id": "h", "text": "' + b"x" * (2 << 20) + b'"}')
    (inbox / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    drop(inbox, "slash", thread="../../etc", id="s1", text="hi")
    drop(inbox, "other-thread", thread="sales-1", id="o1", text="Please send the invoice")
    os.symlink("/dev/zero", inbox / "zero.json")
    drop(inbox, "good", thread="support-1", id="g1", text="Hello?")
    daemon = Daemon(cli)
    try:
        wait_until(lambda: len(replies(spool / "out")) == 1 and not pending(inbox), what="the good message answered")
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    [reply] = replies(spool / "out")
    assert (reply["in_reply_to"], reply["text"]) == ("g1", "fine")
    reasons = {p.name.removesuffix(".json.error"): p.read_text().strip()
               for p in (inbox / "rejected").glob("*.error")}
    assert set(reasons) == {"bad", "list", "huge", "deep", "slash", "other-thread", "zero"}, reasons
    assert "not a message" in reasons["bad"] and "larger than" in reasons["huge"]
    assert "not one this channel may take" in reasons["other-thread"]


def _refused(cli: StrataCLI) -> str:
    """`strata serve` refuses the config: exit 2 and one line on stderr, no traceback (a daemon that started
    instead is stopped by the timeout and fails the test)."""
    try:
        proc = cli.run("serve", "--foreground", timeout=20)
    except subprocess.TimeoutExpired:
        raise AssertionError("strata serve started on a config it should refuse") from None
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_a_spool_channel_whose_inbox_is_its_outbox_is_refused_naming_the_key(cli: StrataCLI, tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    model = script(tmp_path / "s.json", [text("x")])
    write_config(cli, f'[[channels]]\nname = "loop"\nkind = "spool"\ninbox = "{folder}"\noutbox = "{folder}/."\n'
                 f'workspace = "{tmp_path}"\nmodel = "{model}"\n')
    line = _refused(cli)
    assert "channels.loop.outbox" in line and "inbox" in line, line


def test_two_channels_sharing_an_inbox_are_refused_naming_the_key(cli: StrataCLI, tmp_path: Path) -> None:
    model = script(tmp_path / "s.json", [text("x")])
    write_config(cli, spool_table("first", tmp_path / "a", tmp_path, model)
                 + f'[[channels]]\nname = "second"\nkind = "spool"\ninbox = "{tmp_path / "a" / "in"}"\n'
                 f'outbox = "{tmp_path / "b" / "out"}"\nworkspace = "{tmp_path}"\nmodel = "{model}"\n')
    line = _refused(cli)
    assert "channels.second.inbox" in line and "first" in line, line


@pytest.mark.parametrize("value", ["0", "5000", "2.5", '"8"'])
def test_daemon_max_workers_out_of_range_or_not_an_integer_is_a_config_error_naming_the_key(
        cli: StrataCLI, value: str) -> None:
    write_config(cli, f"[daemon]\nmax_workers = {value}\n")
    with pytest.raises(ConfigError, match=r"daemon\.max_workers") as raised:
        load_config(workspace=None, env=_env(cli))
    assert "config.toml" in str(raised.value)


def test_daemon_max_workers_defaults_to_32_and_is_read_from_the_user_file(cli: StrataCLI) -> None:
    assert load_config(workspace=None, env=_env(cli)).channels.max_workers == 32
    write_config(cli, "[daemon]\nmax_workers = 4\n")
    assert load_config(workspace=None, env=_env(cli)).channels.max_workers == 4


@pytest.mark.parametrize(("folder", "says"), [("in", "is also the queue of the webhook channels.hook"),
                                              ("out", "is the reply folder of the webhook channels.hook")])
def test_a_spool_inbox_that_is_a_webhooks_folder_in_the_home_is_a_config_error_naming_the_spools_key(
        cli: StrataCLI, tmp_path: Path, folder: str, says: str) -> None:
    """Two pollers would take the webhook's queued messages (or the spool would read its replies as messages)."""
    webhook = (f'[[channels]]\nname = "hook"\nkind = "webhook"\nport = 8080\ntoken_env = "HOOK_TOKEN"\n'
               f'workspace = "{tmp_path}"\nmodel = "script:/x.json"\n\n')
    spool = (f'[[channels]]\nname = "ops"\nkind = "spool"\ninbox = "{cli.home / "channels" / "hook" / folder}"\n'
             f'outbox = "{tmp_path / "out"}"\nworkspace = "{tmp_path}"\nmodel = "script:/x.json"\n\n')
    for body in (spool + webhook, webhook + spool):
        write_config(cli, body)
        with pytest.raises(ConfigError, match=says) as raised:
            load_config(workspace=None, env=_env(cli))
        assert raised.value.key == "channels.ops.inbox"
