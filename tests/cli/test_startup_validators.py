"""`strata resume` builds the validators of what it reads, not of every table a config file could hold or every
kind of event (config/schema.py `_OwnValidator`, config/loader.py, core/events.py `parse_event_json`): building a
pydantic validator is the costly part of a model, and these were a good part of a resume's start
(bench/cli_startup.py). Seen in a real `strata resume` process: which models and adapters it had built when it
exited."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.cli._helpers import scripted_session
from tests.conftest import StrataCLI

_NEVER_BUILT = ("config.channels:ChannelEntry", "config.channels:DaemonSection", "config.channels:ChannelsConfig",
                "config.schema:PolicySection", "config.schema:RuleEntry",
                "config.schema:HooksSection", "config.schema:HookEntry", "config.schema:SecretsSection",
                "config.mcp:McpConfig", "config.mcp:McpServerDecl",
                "config.mcp:McpServeConfig", "config.knowledge:KnowledgeConfig",
                "tool_executor.locks:HeldCommand")
"""Tables no config file of the test's home has (the built-in defaults' `[policy]`, `[hooks]` and `[secrets]` hold
empty arrays only), the derived config of what is not declared, a lock file's record (no lock file is left): none
is built by a resume."""
_BUILT = ("config.schema:ConfigFile", "config.settings:Settings", "core.events:SessionStarted",
          "core.events:UserMessage", "core.events:SessionResumed")
"""What a resume does validate: the config files and settings, the events it reads and writes."""


def _resume_noting_validators(cli: StrataCLI, args: list[str], tmp_path: Path) -> tuple[
        subprocess.CompletedProcess[str], dict[str, bool]]:
    """`strata ARGS` through its real entry point; for each model named, whether its validator was built, and the
    same for core/events.py's union of every kind (`EventAdapter`)."""
    report = tmp_path / "built.json"
    names = [*_NEVER_BUILT, *_BUILT]
    probe = (
        "import atexit, importlib, json, sys\n"
        "def note():\n"
        "    built = {}\n"
        f"    for name in {names!r}:\n"
        "        module, _, attr = name.partition(':')\n"
        "        built[name] = bool(getattr(importlib.import_module(module), attr).__pydantic_complete__)\n"
        "    built['EventAdapter'] = bool(importlib.import_module('core.events').EventAdapter.pydantic_complete)\n"
        f"    open({str(report)!r}, 'w').write(json.dumps(built))\n"
        "atexit.register(note)\n"
        f"sys.argv = ['strata', *{args!r}]\n"
        "from agent.cli.main import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=cli.cwd, env=cli.env(), capture_output=True,
                          text=True, timeout=60)
    return done, json.loads(report.read_text(encoding="utf-8"))


def test_resume_builds_no_validator_for_config_tables_no_file_holds_nor_for_every_event_kind(
        cli: StrataCLI, tmp_path: Path) -> None:
    sid = scripted_session(cli, tmp_path)
    done, built = _resume_noting_validators(cli, ["resume", sid, "one more question"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "session completed" in done.stdout
    assert all(built[name] for name in _BUILT), built  # the probe sees builds where there are some
    assert not [name for name in _NEVER_BUILT if built[name]], built
    assert not built["EventAdapter"]  # each event read or written was validated by its own kind's class


def test_a_user_file_with_every_table_still_validates_each_and_reports_a_bad_one_by_its_key(
        cli: StrataCLI, tmp_path: Path) -> None:
    """The tables a resume builds only when a file holds them are checked as before once one does: a good file with
    all of them loads, and an error deep in one is named by its dotted key."""
    sid = scripted_session(cli, tmp_path)
    user = cli.home / "xdg-config" / "strata" / "config.toml"
    user.parent.mkdir(parents=True, exist_ok=True)
    good = ('[tools.grep]\ntimeout_s = 5\n[knowledge]\ncommon_term_share = 0.5\n'
            '[mcp.servers.docs]\nurl = "http://127.0.0.1:9/mcp"\n[mcp.servers.docs.tools.search]\n'
            'safety = "read"\neffect = "read_only"\n[daemon]\nturn_budget_s = 60\n'
            '[[channels]]\nname = "inbox"\nkind = "spool"\nworkspace = "/srv/w"\ninbox = "/srv/in"\n'
            'outbox = "/srv/out"\n')
    user.write_text(good, encoding="utf-8")
    shown = cli.run("config", "show")
    assert shown.returncode == 0, shown.stderr
    assert "tool grep: deadline 5s" in shown.stdout
    assert "mcp__docs__search: safety read, effect read_only" in shown.stdout
    user.write_text(good.replace('kind = "spool"', 'kind = "pigeon"'), encoding="utf-8")
    refused = cli.run("resume", sid, "one more question")
    assert refused.returncode == 2, refused.stderr
    assert f"file {user}, key channels[0].kind: must be one of 'spool' or 'webhook' (got 'pigeon')" in refused.stderr
    user.write_text(good.replace("turn_budget_s = 60", "turn_budget_s = 0"), encoding="utf-8")
    refused = cli.run("resume", sid, "one more question")
    assert refused.returncode == 2, refused.stderr
    assert f"file {user}, key daemon.turn_budget_s: must be greater than 0 (got 0)" in refused.stderr
