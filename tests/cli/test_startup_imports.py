"""The command table is lazy (agent/cli/_lazy.py): `strata --help` lists every command from the table without
importing one, and the table's one-line helps and names stay those of the commands themselves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click

from agent.cli._lazy import LazyGroup
from agent.cli.main import COMMANDS, cli
from tests._in_process_cli import set_up_in_process
from tests.cli._helpers import QUICK_NEVER, run_noting_modules
from tests.conftest import REPO, StrataCLI, write_script


def test_the_command_table_names_each_command_with_its_own_one_line_help() -> None:
    ctx = click.Context(cli)
    assert isinstance(cli, LazyGroup)
    assert len({entry.name for entry in COMMANDS}) == len(COMMANDS)
    for entry in COMMANDS:
        command = cli.get_command(ctx, entry.name)
        assert command is not None and command.name == entry.name, entry
        assert command.get_short_help_str(limit=10_000) == entry.short_help, entry.name


def test_help_lists_every_command_without_importing_any_or_the_heavy_libraries() -> None:
    probe = (
        "import io, json, sys, contextlib\n"
        "sys.argv = ['strata', '--help']\n"
        "from agent.cli.main import cli\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        "    cli.main(prog_name='strata')\n"
        "print(json.dumps({'help': out.getvalue(), 'modules': sorted(sys.modules)}))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    listed = {line.split()[0] for line in report["help"].split("Commands:")[1].splitlines() if line.strip()}
    assert listed == {entry.name for entry in COMMANDS}
    loaded = set(report["modules"])
    commands = {entry.target.split(":")[0] for entry in COMMANDS}
    heavy = {"pydantic", "structlog", "rich", "jsonschema", "anthropic", "aiosqlite", "prompt_toolkit", "core.events",
             "tool_executor", "agent.session"}
    assert not loaded & (commands | heavy), sorted(loaded & (commands | heavy))


_SESSION_MACHINERY = {"agent.session", "agent.loop", "agent.evidence_ledger", "agent.reconcile", "tool_executor",
                      "jsonschema", "anthropic", "prompt_toolkit"}
"""What a reading command never needs: the loop, the executor and its schema checks, the model SDK, the terminal
UI. Each costs start-up (bench/cli_startup.py)."""


_TABLE_NEVER = {"agent.cli.quick_mask", "config.masking_key", "core.masking", "observability.record_masking",
                "secrets", "hmac"}
"""What the quick way of `strata timeline`'s table never needs (the masker is for --json alone): ~7% of a denied-
calls table of a long session (bench/cli_startup.py)."""


def test_reading_commands_import_neither_the_session_machinery_nor_the_model_sdk_nor_the_terminal_ui(
        cli: StrataCLI, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n", encoding="utf-8")
    script = write_script(tmp_path / "turns.json", [[{"type": "tool_use", "name": "read_file",
                                                      "input": {"path": "notes.txt"}}]])
    ran = set_up_in_process(cli, "run", "--json", "--model", f"script:{script}", "read the notes")
    assert ran.returncode == 0, ran.stderr
    sid = json.loads(ran.stdout.splitlines()[-1])["session_id"]

    for args, shows, rich, quick in (
            (["sessions"], sid, False, True), (["sessions", "--json"], sid, False, True),
            (["--verbose", "sessions"], sid, False, False),
            (["timeline", sid, "--json"], '"tool": "read_file"', False, True),
            (["--verbose", "timeline", sid, "--json"], '"tool": "read_file"', False, False),
            (["timeline", sid, "--kind", "call", "--decision", "denied"], "no timeline rows", False, True),
            (["show", sid, "--json"], sid, False, False), (["receipts"], "no receipts", False, True),
            (["receipts", sid, "--json"], "", False, True), (["--verbose", "receipts"], "no receipts", False, False),
            (["timeline", sid], "read_file", False, True), (["--verbose", "timeline", sid], "read_file", False, False)):
        done, loaded = run_noting_modules(cli, args, tmp_path)
        assert done.returncode == 0, (args, done.stderr)
        assert shows in done.stdout, (args, done.stdout)
        assert not loaded & _SESSION_MACHINERY, (args, sorted(loaded & _SESSION_MACHINERY))
        # the timeline's table to a pipe is drawn without rich's console, and measured with its cell widths only
        # where a cell is not plain ASCII; nothing else a reading command prints needs rich at all
        assert not loaded & {"rich.console", "rich.table", "rich.text"}, args
        assert ("rich" in loaded) == rich, args
        # the quick ways (agent/cli/quick_timeline.py, quick_sessions.py) read the file with the standard library:
        # no models, no event loop, no logging; the full way configures logging; `show` only at its first record
        # (tests/cli/test_show_logging.py)
        if quick:
            assert not loaded & QUICK_NEVER, (args, sorted(loaded & QUICK_NEVER))
            # the timeline's table is drawn without a masker: its key file, hashes and masking only for --json
            masking = loaded & _TABLE_NEVER
            assert not masking if args[0] == "timeline" and "--json" not in args else masking, (args, masking)
        else:
            assert ("structlog" in loaded) == (args[0] != "show"), args


def test_the_command_line_imports_structlog_without_rich_and_logs_exceptions_as_plain_text(
        cli: StrataCLI, tmp_path: Path) -> None:
    """structlog is imported with rich hidden (agent/cli/_plain_structlog.py): its dev renderer falls back to plain
    tracebacks, which is what Strata's stderr renderer gives it anyway; rich stays importable afterwards."""
    probe = (
        "import logging, sys\n"
        "from agent.cli._plain_structlog import import_structlog_plain\n"
        "import_structlog_plain()\n"
        "assert 'rich' not in sys.modules\n"
        "import structlog.dev\n"
        "assert structlog.dev.rich is None\n"
        "from observability import configure_logging\n"
        "configure_logging(False)\n"
        "try:\n"
        "    raise ValueError('boom')\n"
        "except ValueError:\n"
        "    structlog.get_logger('t').exception('it failed')\n"
        "import rich.console\n"
        "print(rich.console.Console.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=cli.env(), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Console\n"
    assert "it failed" in done.stderr and "Traceback (most recent call last)" in done.stderr
    assert "ValueError: boom" in done.stderr


def test_resume_of_a_session_without_a_bash_call_never_imports_the_shell_command_reader(
        cli: StrataCLI, tmp_path: Path) -> None:
    """The reader of bash command lines (tool_executor/shell) is imported by the check of a bash call, not by the
    executor's import: a resume whose turns call no bash does without it (bench/cli_startup.py)."""
    script = write_script(tmp_path / "turns.json", [])
    ran = set_up_in_process(cli, "run", "--json", "--model", f"script:{script}", "hello")
    assert ran.returncode == 0, ran.stderr
    sid = json.loads(ran.stdout.splitlines()[-1])["session_id"]
    done, loaded = run_noting_modules(cli, ["resume", sid, "one more question"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "tool_executor.executor" in loaded and "tool_executor.checks.policy" in loaded
    assert not {m for m in loaded if m.startswith("tool_executor.shell")}, sorted(loaded)


_RESUME_NEVER = {"agent.reconcile", "observability.child_sessions", "observability.session_timeline",
                 "tool_executor.builtin._grep", "agent.cli.views", "agent.cli.session_list", "config.trust",
                 "config.tables", "agent.mcp", "agent.cli.mcp_cmd", "config.channels"}
"""What a plain `strata resume ID PROMPT` of a session without delegate or grep calls never needs: the
reconciliation of receipts (a person's name only for `--without-project-hooks`), the children's timelines (only
once a delegate call ran), the grep tool (only at its first call), the JSON views (only for `--json`), the record
of trusted projects (only where the workspace has a project file), the models of the `[tools]`, `[knowledge]` and
`[mcp]` tables and of the daemon's `[[channels]]` and `[daemon]` (only for a file that has one), the MCP machinery
(only when a server is configured)."""


def test_a_plain_resume_imports_neither_reconciliation_nor_child_timelines_nor_grep_nor_json_views(
        cli: StrataCLI, tmp_path: Path) -> None:
    script = write_script(tmp_path / "turns.json", [])
    ran = set_up_in_process(cli, "run", "--json", "--model", f"script:{script}", "hello")
    assert ran.returncode == 0, ran.stderr
    sid = json.loads(ran.stdout.splitlines()[-1])["session_id"]
    done, loaded = run_noting_modules(cli, ["resume", sid, "one more question"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "session completed" in done.stdout
    assert "agent.delegation" in loaded and "tool_executor.builtin.fs" in loaded  # the runtime itself is there
    assert not loaded & _RESUME_NEVER, sorted(loaded & _RESUME_NEVER)
    # each is still there when it is needed: the JSON views for --json, the waiver's person for the flag
    done, loaded = run_noting_modules(cli, ["resume", sid, "again", "--json", "--without-project-hooks"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["status"] == "completed"
    assert {"agent.cli.views", "agent.reconcile"} <= loaded
    # a workspace with a project file: its trust is looked up, and an untrusted file's allow rule is ignored
    project = cli.cwd / ".strata" / "config.toml"
    project.parent.mkdir(exist_ok=True)
    project.write_text('[[policy.rules]]\ntool = "bash"\naction = "allow"\n', encoding="utf-8")
    done, loaded = run_noting_modules(cli, ["resume", sid, "and again"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "config.trust" in loaded
    assert "is not trusted: its 1 allow rule is ignored" in done.stdout + done.stderr


def test_grep_imports_its_module_at_its_first_call_and_finds_what_it_did(cli: StrataCLI, tmp_path: Path) -> None:
    (cli.cwd / "notes.txt").write_text("alpha\nneedle-7f3a here\nomega\n", encoding="utf-8")
    script = write_script(tmp_path / "turns.json", [[{"type": "tool_use", "name": "grep",
                                                      "input": {"pattern": "needle-7f3a", "path": "."}}]])
    done = cli.run("run", "--json", "--allow", "grep", "--model", f"script:{script}", "find it")
    assert done.returncode == 0, done.stderr
    assert any("notes.txt" in line and "needle-7f3a" in line for line in done.stdout.splitlines()), done.stdout


def _install_pydantic_plugin(site: Path, seen: Path) -> None:
    """A distribution in `site` registering a pydantic plugin (entry point group `pydantic`) that writes every value
    validated in its process to `seen`: what a plugin installed for another program could do."""
    (site / "spy_plugin.py").write_text(
        "class _Handler:\n"
        "    def on_enter(self, input, **kwargs):\n"
        f"        open({str(seen)!r}, 'a').write(repr(input) + '\\n')\n"
        "class Plugin:\n"
        "    def new_schema_validator(self, schema, schema_type, schema_type_path, schema_kind, config,\n"
        "                             plugin_settings):\n"
        "        return _Handler(), None, None\n"
        "plugin = Plugin()\n", encoding="utf-8")
    dist = site / "spy_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: spy-plugin\nVersion: 1.0\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[pydantic]\nspy = spy_plugin:plugin\n", encoding="utf-8")


def test_a_command_loads_no_pydantic_plugin_and_never_scans_the_installed_distributions(
        cli: StrataCLI, tmp_path: Path) -> None:
    """A pydantic plugin sees every value validated in its process, tool results and secrets included; a Strata
    command loads none (agent/cli/startup_pydantic.py), and skips pydantic's scan of every installed distribution
    (`importlib.metadata`), which was some 5% of `strata resume`'s start."""
    site, seen = tmp_path / "site", tmp_path / "seen.txt"
    site.mkdir()
    _install_pydantic_plugin(site, seen)
    extra = {"PYTHONPATH": os.pathsep.join([str(REPO), str(site)])}
    env = cli.env(extra)
    control = subprocess.run(
        [sys.executable, "-c", "import pydantic\nclass M(pydantic.BaseModel):\n    x: str\nM(x='validated')\n"],
        env=env, capture_output=True, text=True, timeout=60)
    assert control.returncode == 0, control.stderr
    assert "validated" in seen.read_text(encoding="utf-8")  # the plugin works where pydantic looks for plugins
    seen.unlink()

    script = write_script(tmp_path / "turns.json", [])
    secret_prompt = "my token is tok-PLUGIN-MUST-NOT-SEE"
    ran = cli.run("run", "--json", "--model", f"script:{script}", secret_prompt, env=extra)
    assert ran.returncode == 0, ran.stderr
    sid = json.loads(ran.stdout.splitlines()[-1])["session_id"]
    done, loaded = run_noting_modules(cli, ["resume", sid, "one more question"], tmp_path, env=extra)
    assert done.returncode == 0, done.stderr
    assert not seen.exists()  # nothing reached the plugin, in either command
    assert "importlib.metadata" not in loaded and "spy_plugin" not in loaded
    assert "pydantic" in loaded  # the models were built, without plugins


def test_the_installed_pydantic_asks_its_plugin_loader_for_get_plugins_only() -> None:
    """The loader Strata puts in pydantic's place defines `get_plugins` alone; a pydantic that imported anything
    else from `pydantic.plugin._loader` would fail at its first model build, so this fails first."""
    import pydantic.plugin

    package = Path(pydantic.plugin.__file__).parent.parent
    imports = set()
    for source in package.rglob("*.py"):
        text = source.read_text(encoding="utf-8")
        for line in text.splitlines():
            if "_loader import" in line and "plugin" in str(source.relative_to(package)):
                imports.add(line.split("import", 1)[1].strip())
            assert "plugin._loader" not in line or "import" not in line or "get_plugins" in line, (source, line)
    assert imports == {"get_plugins"}, imports


_RUN_NEVER = {"anthropic", "mcp", "jsonschema", "prompt_toolkit", "rich.console", "agent.channels", "agent.daemon",
              "agent.mcp", "agent.cli.mcp_cmd", "config.channels"}
"""What a `strata run` of the scripted model never needs: the API's SDK, the MCP SDK and Strata's MCP machinery (no
server configured), the schema library, the terminal UI, the daemon's channels and host and their config's models
(no `[[channels]]` or `[daemon]` declared). The SDK alone is ~0.7 s of CPU."""


def test_a_scripted_run_and_a_run_without_an_api_key_never_import_the_model_sdk(cli: StrataCLI,
                                                                                tmp_path: Path) -> None:
    script = write_script(tmp_path / "turns.json", [[{"type": "tool_use", "name": "bash",
                                                      "input": {"command": "echo hi"}}]])
    done, loaded = run_noting_modules(cli, ["run", "--json", "--model", f"script:{script}", "hello"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["status"] == "completed"
    assert "agent.loop" in loaded and "tool_executor.executor" in loaded  # the runtime itself is there
    assert not loaded & _RUN_NEVER, sorted(loaded & _RUN_NEVER)
    # the API model without a key is refused before its SDK is loaded: the refusal is one line, at once
    done, loaded = run_noting_modules(cli, ["run", "--model", "anthropic:claude-test", "hello"], tmp_path,
                                      env={"ANTHROPIC_API_KEY": ""})
    assert done.returncode == 2, done.stderr
    assert "no Anthropic API key" in done.stderr
    assert not loaded & _RUN_NEVER, sorted(loaded & _RUN_NEVER)
    # with a key, a blank prompt is refused before the model (and its SDK) is made
    done, loaded = run_noting_modules(cli, ["run", "--model", "anthropic:claude-test", "  "], tmp_path,
                                      env={"ANTHROPIC_API_KEY": "sk-ant-fake-key-for-tests"})
    assert done.returncode == 2, done.stderr
    assert "the prompt is empty" in done.stderr
    assert not loaded & _RUN_NEVER, sorted(loaded & _RUN_NEVER)


_PARSING_NEVER = {"structlog", "pydantic", "asyncio", "anyio", "core.events", "config.loader", "agent.session",
                  "agent.cli._common", "agent.cli._session_run", "observability.logging"}
"""What `strata run` and `strata resume` need not import to parse their arguments (agent/cli/session_cmds.py):
a usage error or `--help` is said before any of it (a mistyped option cost the whole start of a session)."""


def test_run_and_resume_parse_their_arguments_before_importing_what_they_run(cli: StrataCLI, tmp_path: Path) -> None:
    for args, says, code in ((["run", "--bogus", "hello"], "No such option '--bogus'", 2),
                             (["run"], "Missing argument 'PROMPT'", 2),
                             (["resume"], "Missing argument 'SESSION_ID'", 2),
                             (["resume", "some-id", "--max-turns", "0"], "Invalid value for '--max-turns'", 2),
                             (["run", "--help"], "Run a headless session on PROMPT.", 0),
                             (["--verbose", "resume", "--help"], "--kill-orphans", 0)):
        done, loaded = run_noting_modules(cli, args, tmp_path)
        assert done.returncode == code, (args, done.stderr)
        assert says in done.stdout + done.stderr, (args, done.stdout, done.stderr)
        assert not loaded & _PARSING_NEVER, (args, sorted(loaded & _PARSING_NEVER))
    # once parsed, the command imports what it runs and works as before (the collector and logging as before:
    # tests/cli/test_startup_gc.py, test_reading_commands_... above)
    script = write_script(tmp_path / "turns.json", [])
    done, loaded = run_noting_modules(cli, ["--verbose", "run", "--json", "--model", f"script:{script}", "hello"],
                                      tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["status"] == "completed"
    assert {"agent.cli._session_run", "observability.logging"} <= loaded
    assert "event committed" in done.stderr  # --verbose: the logging the body set up shows each event
