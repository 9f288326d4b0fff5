"""Every malformed config file is one ConfigError line naming the file, the key (a dotted path, entries counted
from 0) and the reason; a TOML syntax error names the line and column. A project file that is not trusted is
still checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from config import trust_project
from core.errors import ConfigError
from tests.config._layout import Layout

RULE = '[[policy.rules]]\ntool = "bash"\naction = "allow"\n'

# (name, file text, key named, reason fragment)
MALFORMED = [
    ("unknown top-level key", "max_turn = 5\n", "max_turn", "unknown key 'max_turn' (did you mean 'max_turns'?)"),
    ("unknown table", "[plugins]\nx = 1\n", "plugins", "unknown key 'plugins'"),
    ("unknown key in a hook", '[[hooks.pre_tool_use]]\ncommand = "x"\nmatchr = "*"\n', "hooks.pre_tool_use[0].matchr",
     "did you mean 'matcher'"),
    ("unknown hook event", "[hooks]\npre = []\n", "hooks.pre", "allowed here: pre_tool_use, post_tool_use, stop"),
    ("unknown key in [mcp]", "[mcp]\nserverz = {}\n", "mcp.serverz", "unknown key 'serverz' (did you mean 'servers'?)"),
    ("unknown key in [knowledge]", "[knowledge]\nshare = 0.5\n", "knowledge.share",
     "unknown key 'share' (allowed here: common_term_share, datasets)"),
    ("wrong type: string for int", 'max_turns = "5"\n', "max_turns", "must be an integer (got '5')"),
    ("wrong type: bool for int", "max_turns = true\n", "max_turns", "must be an integer (got true)"),
    ("wrong type: float for int", "repair_budget = 1.5\n", "repair_budget", "must be an integer (got 1.5)"),
    ("wrong type: date", "max_turns = 1979-05-27\n", "max_turns", "must be an integer (got a date/time)"),
    ("wrong type: table expected", "policy = 5\n", "policy", "must be a table (got 5)"),
    ("wrong type: array expected", '[policy]\nrules = { tool = "x" }\n', "policy.rules", "must be an array"),
    ("bad enum: durability", 'durability = "fast"\n', "durability", "must be one of 'full' or 'normal' (got 'fast')"),
    ("bad enum: on_ask", 'on_ask = "maybe"\n', "on_ask", "must be one of 'deny' or 'park'"),
    ("bad enum: rule action", RULE * 2 + '[[policy.rules]]\ntool = "bash"\naction = "permit"\n',
     "policy.rules[2].action", "must be one of 'allow', 'ask' or 'deny' (got 'permit')"),
    ("out of range: max_turns", "max_turns = 0\n", "max_turns", "must be at least 1 (got 0)"),
    ("out of range: lock timeout", "lock_timeout_s = -1\n", "lock_timeout_s", "must be greater than 0"),
    ("not finite: lock timeout", "lock_timeout_s = nan\n", "lock_timeout_s", "must be a finite number"),
    ("out of range: repair budget", "repair_budget = -1\n", "repair_budget", "must be at least 0"),
    ("huge float: lock timeout", "lock_timeout_s = 1e308\n", "lock_timeout_s", "must be at most 86400 (got 1e+308)"),
    ("over a day: lock timeout", "lock_timeout_s = 86401\n", "lock_timeout_s", "must be at most 86400 (got 86401)"),
    ("huge float for an integer", "max_turns = 1e308\n", "max_turns", "must be an integer (got 1e+308)"),
    ("huge: repair budget", "repair_budget = 9223372036854775807\n", "repair_budget", "must be at most 1000"),
    ("huge: context budget", "context_budget_tokens = 10_000_001\n", "context_budget_tokens",
     "must be at most 10000000"),
    ("huge: snapshot interval", "snapshot_every = 1_000_001\n", "snapshot_every", "must be at most 1000000"),
    ("out of range: hook timeout", '[[hooks.stop]]\ncommand = "x"\ntimeout_s = 601\n', "hooks.stop[0].timeout_s",
     "must be at most 600 (got 601)"),
    ("zero hook timeout", '[[hooks.post_tool_use]]\ncommand = "x"\ntimeout_s = 0\n',
     "hooks.post_tool_use[0].timeout_s", "must be greater than 0"),
    ("empty model", 'model = ""\n', "model", "must not be empty"),
    ("empty hook command", '[[hooks.pre_tool_use]]\ncommand = "  "\n', "hooks.pre_tool_use[0].command",
     "must not be empty"),
    ("missing hook command", '[[hooks.pre_tool_use]]\nmatcher = "bash"\n', "hooks.pre_tool_use[0].command",
     "missing required key"),
    ("missing rule action", '[[policy.rules]]\ntool = "bash"\n', "policy.rules[0].action", "missing required key"),
    ("bad glob in args", RULE.replace('action = "allow"', 'action = "allow"\nargs = { command = "[abc" }'),
     "policy.rules[0].args.command", "a '[' is never closed"),
    ("bad primary pattern", RULE + 'pattern = "x[y"\n', "policy.rules[0].pattern", "a '[' is never closed"),
    ("empty pattern", RULE + 'pattern = ""\n', "policy.rules[0].pattern", "must not be empty"),
    ("bad tool glob", '[[policy.rules]]\ntool = "ba sh"\naction = "deny"\n', "policy.rules[0].tool",
     "a tool glob may use only"),
    ("bad hook matcher", '[[hooks.pre_tool_use]]\nmatcher = ""\ncommand = "x"\n', "hooks.pre_tool_use[0].matcher",
     "must not be empty"),
    ("empty args key", RULE + 'args = { "" = "x" }\n', 'policy.rules[0].args[""]', "must not be empty"),
    ("bad secret env name", '[secrets]\nenv = ["1X"]\n', "secrets.env[0]", "not a valid environment variable name"),
    ("short secret value", '[secrets]\nvalues = ["abc"]\n', "secrets.values[0]", "at least 4 characters"),
    ("mcp server with neither command nor url", "[mcp.servers.tracker]\nargs = []\n", "mcp.servers.tracker",
     "give either `command` (stdio) or `url` (streamable HTTP)"),
    ("mcp server with both command and url", '[mcp.servers.t]\ncommand = "x"\nurl = "http://127.0.0.1:1/mcp"\n',
     "mcp.servers.t", "give either `command` (stdio) or `url`"),
    ("mcp server name with a double underscore", '[mcp.servers.a__b]\ncommand = "x"\n', "mcp.servers.a__b",
     "an MCP server name is"),
    ("mcp serve token_env that is no variable name", '[mcp.serve]\ntoken_env = "MY-TOKEN"\n', "mcp.serve.token_env",
     "not a valid environment variable name"),
    ("mcp serve token_env that is not a string", "[mcp.serve]\ntoken_env = 16\n", "mcp.serve.token_env",
     "must be a string"),
    ("mcp url that is not http", '[mcp.servers.t]\nurl = "file:///etc/passwd"\n', "mcp.servers.t.url",
     "must be an http:// or https:// URL"),
    ("mcp tool policy with a bad effect", '[mcp.servers.t]\ncommand = "x"\n[mcp.servers.t.tools.close]\n'
     'safety = "write"\neffect = "sometimes"\n', "mcp.servers.t.tools.close.effect",
     "must be one of 'read_only', 'idempotent' or 'effectful'"),
    ("mcp tool policy without a safety level", '[mcp.servers.t]\ncommand = "x"\n[mcp.servers.t.tools.close]\n'
     'effect = "effectful"\n', "mcp.servers.t.tools.close.safety", "missing required key"),
    ("mcp resource key that is not a template", '[mcp.servers.t]\ncommand = "x"\n[mcp.servers.t.tools.c]\n'
     'safety = "write"\neffect = "effectful"\nresource_keys = ["issue:{repo"]\n',
     "mcp.servers.t.tools.c.resource_keys[0]", "not a valid template"),
    ("mcp unknown key in a tool policy", '[mcp.servers.t]\ncommand = "x"\n[mcp.servers.t.tools.c]\n'
     'safety = "write"\neffect = "effectful"\nresource_key = []\n', "mcp.servers.t.tools.c.resource_key",
     "unknown key 'resource_key'"),
]


@pytest.mark.parametrize("where", ["user", "project"])
@pytest.mark.parametrize(("text", "key", "reason"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_file_names_file_key_and_reason(tmp_path: Path, where: str, text: str, key: str,
                                                  reason: str) -> None:
    """One line: `file PATH, key KEY: REASON`, with typed fields; an untrusted project file is checked too."""
    layout = Layout.make(tmp_path)
    path = layout.write_user(text) if where == "user" else layout.write_project(text)
    with pytest.raises(ConfigError) as info:
        layout.load()
    err = info.value
    assert (err.file, err.key) == (str(path), key)
    assert str(err).startswith(f"file {path}, key {key}: ")
    assert reason in str(err)
    assert "\n" not in str(err) and err.hint is None
    assert err.exit_code != 0


@pytest.mark.parametrize(("text", "position"), [
    ("max_turns = = 5\n", "line 1, column 13"),
    ('durability = "full"\n[policy\n', "line 2, column 8"),
    ('model = "unterminated\n', "line 1"),
    ("max_turns = 5\nmax_turns = 6\n", "line 2"),
])
def test_toml_syntax_error_names_line_and_column(tmp_path: Path, text: str, position: str) -> None:
    """A file that is not TOML is named with the parser's line and column (there is no key to name)."""
    layout = Layout.make(tmp_path)
    path = layout.write_project(text)
    with pytest.raises(ConfigError) as info:
        layout.load()
    assert info.value.file == str(path) and info.value.key is None
    assert str(info.value).startswith(f"file {path}: invalid TOML: ")
    assert position in str(info.value)
    assert "\n" not in str(info.value)


def test_several_problems_are_counted_not_listed(tmp_path: Path) -> None:
    """The first problem is named; the rest are counted, so the message stays one line."""
    layout = Layout.make(tmp_path)
    layout.write_user('max_turns = "x"\ndurability = 1\nfoo = 2\n')
    with pytest.raises(ConfigError, match=r"key max_turns: .*\(and 2 more problems in this file\)$"):
        layout.load()


def test_secret_values_are_not_echoed(tmp_path: Path) -> None:
    """An invalid secret value is reported by key, never by value."""
    layout = Layout.make(tmp_path)
    layout.write_user('[secrets]\nvalues = ["s3c"]\n')
    with pytest.raises(ConfigError) as info:
        layout.load()
    assert "s3c" not in str(info.value)


def test_not_utf8_is_an_error(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 are a clear error, not a crash."""
    layout = Layout.make(tmp_path)
    layout.project_file.parent.mkdir(parents=True)
    layout.project_file.write_bytes(b"model = \"\xff\"\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        layout.load()


def test_unreadable_config_path_is_an_error(tmp_path: Path) -> None:
    """A config path that is a directory is reported with the file named."""
    layout = Layout.make(tmp_path)
    layout.user_file.mkdir(parents=True)
    with pytest.raises(ConfigError, match="cannot read the file") as info:
        layout.load()
    assert info.value.file == str(layout.user_file)


def test_malformed_project_file_is_never_trusted(tmp_path: Path) -> None:
    """trust_project refuses a malformed file with the same error, and records nothing."""
    layout = Layout.make(tmp_path)
    layout.write_project('[[policy.rules]]\ntool = "bash"\naction = "permit"\n')
    with pytest.raises(ConfigError, match=r"key policy.rules\[0\].action: must be one of"):
        trust_project(layout.home, layout.workspace)
    assert not (layout.home / "trusted_projects.json").exists()


@pytest.mark.parametrize("content", ["not json", json.dumps({"version": 1, "projects": {"/x": {"sha256": "zz"}}}),
                                     json.dumps({"version": 9})])
def test_corrupt_trust_record_is_an_error(tmp_path: Path, content: str) -> None:
    """A damaged trust record is named with a hint, never silently read as 'everything trusted'."""
    layout = Layout.make(tmp_path)
    layout.write_project("max_turns = 3\n")
    (layout.home / "trusted_projects.json").write_text(content)
    with pytest.raises(ConfigError, match="corrupt trust record") as info:
        layout.load()
    assert info.value.file == str(layout.home / "trusted_projects.json")
    assert info.value.hint and "strata trust" in info.value.hint


@pytest.mark.parametrize(("variable", "value", "reason"), [
    ("STRATA_LOCK_TIMEOUT_S", "1e308", "must be at most 86400 (got '1e308' from environment variable"),
    ("STRATA_CONTEXT_BUDGET_TOKENS", "99999999999999999999", "must be at most 10000000"),
    ("STRATA_SNAPSHOT_EVERY", "2000000", "must be at most 1000000"),
])
def test_a_huge_number_in_the_environment_is_one_line_with_its_bound(tmp_path: Path, variable: str, value: str,
                                                                    reason: str) -> None:
    """The bounds hold whichever layer a value comes from; the error never spells out a 309-digit number."""
    with pytest.raises(ConfigError) as info:
        Layout.make(tmp_path).load(**{variable: value})
    assert reason in str(info.value) and "\n" not in str(info.value) and len(str(info.value)) < 300, str(info.value)


@pytest.mark.parametrize("where", ["user", "project"])
@pytest.mark.parametrize("text", ["max_turns = " + "9" * 5000 + "\n",
                                  "[tools.bash]\ntimeout_s = -" + "1" * 4301 + "\n"])
def test_an_integer_too_long_to_read_is_a_toml_error_naming_the_file(tmp_path: Path, where: str, text: str) -> None:
    """Python reads no integer of more than 4300 digits (its int/str limit): tomllib's ValueError is not a
    TOMLDecodeError, and escaped as an internal error. It is one line naming the file, as any unreadable TOML."""
    layout = Layout.make(tmp_path)
    path = layout.write_user(text) if where == "user" else layout.write_project(text)
    with pytest.raises(ConfigError) as info:
        layout.load()
    message = str(info.value)
    assert info.value.file == str(path) and message.startswith(f"file {path}: invalid TOML: ")
    assert "more than 4300 digits" in message and "\n" not in message and len(message) < 300, message


@pytest.mark.parametrize(("variable", "value"), [
    ("STRATA_CONTEXT_BUDGET_TOKENS", "9" * 5000),
    ("STRATA_MAX_TURNS", "-" + "1" * 4400),
    ("STRATA_LOCK_TIMEOUT_S", "1" + "0" * 5000),
])
def test_an_environment_number_of_thousands_of_digits_is_one_short_line(tmp_path: Path, variable: str,
                                                                         value: str) -> None:
    """A variable holding thousands of digits names the variable and a reason in words (never pydantic's
    'exceeded maximum size'), and shows the value cut short, never all of it."""
    with pytest.raises(ConfigError) as info:
        Layout.make(tmp_path).load(**{variable: value})
    message = str(info.value)
    assert variable in message and "\n" not in message and len(message) < 300, message
    assert "maximum size" not in message and value not in message


@pytest.mark.parametrize("where", ["user", "project"])
@pytest.mark.parametrize("text", ["max_turns = " + "[" * 2000 + "]" * 2000 + "\n",
                                  "x = " + "{a = " * 2000 + "1" + "}" * 2000 + "\n"])
def test_toml_nested_deeper_than_can_be_read_is_one_line_naming_the_file(tmp_path: Path, where: str,
                                                                         text: str) -> None:
    """tomllib reads nesting by recursion: a small file of arrays or inline tables nested a few thousand deep raised
    RecursionError, an internal error. It is one line naming the file."""
    layout = Layout.make(tmp_path)
    path = layout.write_user(text) if where == "user" else layout.write_project(text)
    with pytest.raises(ConfigError) as info:
        layout.load()
    message = str(info.value)
    assert info.value.file == str(path) and message.startswith(f"file {path}: invalid TOML: ")
    assert "nested too deeply" in message and "\n" not in message, message


@pytest.mark.parametrize("value", ["/tmp/strata.db", "sqlite:///tmp/strata.db", "postgresql://a b"])
def test_a_db_that_is_not_a_postgresql_url_says_so_in_words(tmp_path: Path, value: str) -> None:
    """STRATA_DB or `db` given a SQLite path named pydantic's regular expression; the reason says what it takes
    and where the SQLite store is set."""
    layout = Layout.make(tmp_path)
    for load in (lambda: layout.load(STRATA_DB=value), lambda: (layout.write_user(f"db = {json.dumps(value)}\n"),
                                                                 layout.load())):
        with pytest.raises(ConfigError) as info:
            load()
        message = str(info.value)
        assert "key db: must be a postgresql:// URL" in message and "STRATA_HOME" in message, message
        assert "pattern" not in message and "\n" not in message
