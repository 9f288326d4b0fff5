"""Layering: built-in defaults < user file < project file < STRATA_* environment < flags, each effective value
naming its source; rules, hooks and secrets accumulate across files."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

import pytest

from config import SETTING_KEYS, ConfigFile, Settings, load_config, load_settings, read_config_file
from core.errors import ConfigError
from tests.config._layout import Layout

REPO = Path(__file__).resolve().parents[2]
LAYERS = ("defaults", "user", "project", "env", "flag")

# key -> the value each layer sets (the env layer as the string a variable holds) and the effective value.
TABLE: dict[str, dict[str, tuple[object, object]]] = {
    "max_turns": {"defaults": (None, 50), "user": (10, 10), "project": (20, 20), "env": ("30", 30),
                  "flag": (40, 40)},
    "durability": {"defaults": (None, "full"), "user": ("normal", "normal"), "project": ("full", "full"),
                   "env": ("normal", "normal"), "flag": ("full", "full")},
    "on_ask": {"defaults": (None, "deny"), "user": ("park", "park"), "project": ("deny", "deny"),
               "env": ("park", "park"), "flag": ("deny", "deny")},
    "lock_timeout_s": {"defaults": (None, 30.0), "user": (11, 11.0), "project": (12.5, 12.5), "env": ("13", 13.0),
                       "flag": (14.0, 14.0)},
    "hook_timeout_s": {"defaults": (None, 10.0), "user": (1, 1.0), "project": (2, 2.0), "env": ("3.5", 3.5),
                       "flag": (4, 4.0)},
    "repair_budget": {"defaults": (None, 2), "user": (0, 0), "project": (5, 5), "env": ("6", 6), "flag": (7, 7)},
    "context_budget_tokens": {"defaults": (None, 150_000), "user": (1000, 1000), "project": (2000, 2000),
                              "env": ("3000", 3000), "flag": (4000, 4000)},
    "snapshot_every": {"defaults": (None, 500), "user": (0, 0), "project": (50, 50), "env": ("60", 60),
                       "flag": (70, 70)},
    "drain_grace_s": {"defaults": (None, 10.0), "user": (0, 0.0), "project": (1.5, 1.5), "env": ("2", 2.0),
                      "flag": (3.0, 3.0)},
    "delegate_max_depth": {"defaults": (None, 2), "user": (0, 0), "project": (1, 1), "env": ("3", 3),
                           "flag": (4, 4)},
    "delegate_in_daemon": {"defaults": (None, False), "user": (True, True), "project": (False, False),
                           "env": ("true", True), "flag": (True, True)},
    "delegate_grants": {"defaults": (None, False), "user": (True, True), "project": (False, False),
                        "env": ("true", True), "flag": (True, True)},
    "model": {"defaults": (None, None), "user": ("script:/u.json", "script:/u.json"),
              "project": ("script:/p.json", "script:/p.json"), "env": ("anthropic:e", "anthropic:e"),
              "flag": ("script:/f.json", "script:/f.json")},
}


def _toml(values: dict[str, object]) -> str:
    return "".join(f"{k} = {str(v).lower() if isinstance(v, bool) else repr(v)}\n".replace("'", '"')
                   for k, v in values.items())


@pytest.mark.parametrize("top", LAYERS)
def test_precedence_table(tmp_path: Path, top: str) -> None:
    """Each layer overrides the ones below it, for every scalar key, and `sources` names the winning layer."""
    layout = Layout.make(tmp_path)
    upto = LAYERS[: LAYERS.index(top) + 1]
    if "user" in upto:
        layout.write_user(_toml({k: row["user"][0] for k, row in TABLE.items()}))
    if "project" in upto:
        layout.write_project(_toml({k: row["project"][0] for k, row in TABLE.items()}))
    env = {f"STRATA_{k.upper()}": str(row["env"][0]) for k, row in TABLE.items()} if "env" in upto else {}
    flags = {k: row["flag"][0] for k, row in TABLE.items()} if "flag" in upto else None

    loaded = layout.load(flags=flags, **env)

    expected_source = {"defaults": "built-in defaults", "user": str(layout.user_file),
                       "project": str(layout.project_file)}
    for key, row in TABLE.items():
        assert getattr(loaded.settings, key) == row[top][1], key
        source = expected_source.get(top) or (
            f"environment variable STRATA_{key.upper()}" if top == "env" else f"flag --{key.replace('_', '-')}")
        assert loaded.sources[key] == source, key
    assert set(loaded.sources) == {"home", *SETTING_KEYS}


def test_layers_merge_key_by_key(tmp_path: Path) -> None:
    """A file overrides only the keys it sets; the rest keep the lower layers' values and sources."""
    layout = Layout.make(tmp_path)
    layout.write_user('durability = "normal"\nmax_turns = 9\n')
    layout.write_project("max_turns = 8\n")
    loaded = layout.load(STRATA_ON_ASK="park")
    assert (loaded.settings.durability, loaded.settings.max_turns, loaded.settings.on_ask) == ("normal", 8, "park")
    assert loaded.sources["durability"] == str(layout.user_file)
    assert loaded.sources["max_turns"] == str(layout.project_file)
    assert loaded.sources["on_ask"] == "environment variable STRATA_ON_ASK"
    assert loaded.sources["repair_budget"] == "built-in defaults"
    assert loaded.files == (str(layout.user_file), str(layout.project_file))


def test_defaults_file_agrees_with_settings_model() -> None:
    """config/defaults.toml sets every key except `model` and `db` (none by default), to the same values the
    Settings model defaults to."""
    resource = resources.files("config").joinpath("defaults.toml")
    data = tomllib.loads(resource.read_text(encoding="utf-8"))
    ConfigFile.model_validate(data)
    fields = Settings.model_fields
    unset = ("model", "db")
    assert {k: data[k] for k in SETTING_KEYS if k not in unset} == {k: fields[k].default for k in SETTING_KEYS
                                                                     if k not in unset}
    assert not set(unset) & set(data)


def test_defaults_file_is_package_data() -> None:
    """pyproject ships config/*.toml with the package, so an installed strata finds its defaults."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert "*.toml" in pyproject["tool"]["setuptools"]["package-data"]["config"]


def test_schema_and_settings_keys_agree() -> None:
    """Every settable scalar is a key of the file schema (so a file can set it) and nothing else is."""
    tables = {"policy", "hooks", "secrets", "tools", "knowledge", "mcp", "channels", "daemon"}
    assert set(ConfigFile.model_fields) - tables == set(SETTING_KEYS)


def test_rules_accumulate_user_then_trusted_project(tmp_path: Path) -> None:
    """Policy rules from the user file and a trusted project both apply, user first, each naming its file; the
    `pattern` key is the primary-argument glob and `args` the per-argument globs."""
    from config import trust_project

    layout = Layout.make(tmp_path)
    layout.write_user('[[policy.rules]]\ntool = "read_*"\naction = "allow"\n')
    layout.write_project('[[policy.rules]]\ntool = "bash"\npattern = "git *"\nargs = { cwd = "src/*" }\n'
                         'action = "allow"\n')
    trust_project(layout.home, layout.workspace)
    rules = layout.load().rules
    assert [(r.action, r.tool, r.pattern, r.args, r.source) for r in rules] == [
        ("allow", "read_*", None, {}, str(layout.user_file)),
        ("allow", "bash", "git *", {"cwd": "src/*"}, str(layout.project_file)),
    ]


def test_hooks_take_the_effective_default_timeout(tmp_path: Path) -> None:
    """A hook without `timeout_s` gets the effective `hook_timeout_s` (here from the environment); its own wins."""
    layout = Layout.make(tmp_path)
    layout.write_user('[[hooks.pre_tool_use]]\ncommand = "a"\n[[hooks.pre_tool_use]]\nmatcher = "bash"\n'
                      'command = "b"\ntimeout_s = 2\n[[hooks.post_tool_use]]\ncommand = "c"\n')
    hooks = layout.load(STRATA_HOOK_TIMEOUT_S="7").hooks
    assert [(h.event, h.name, h.matcher, h.command, h.timeout_s) for h in hooks] == [
        ("pre_tool_use", "hooks.pre_tool_use[0]", "*", "a", 7.0),
        ("pre_tool_use", "hooks.pre_tool_use[1]", "bash", "b", 2.0),
        ("post_tool_use", "hooks.post_tool_use[0]", "*", "c", 7.0),
    ]
    assert all(h.source == str(layout.user_file) for h in hooks)
    assert hooks[1].matches("bash") and not hooks[1].matches("write_file")
    hook = hooks[1].to_hook()
    assert (hook.name, hook.command, hook.timeout_s, hook.source) == ("hooks.pre_tool_use[1]", "b", 2.0,
                                                                      str(layout.user_file))


def test_secrets_accumulate_without_duplicates(tmp_path: Path) -> None:
    """Secret values and variable names from every file (an untrusted project too: they only add masking)."""
    layout = Layout.make(tmp_path)
    layout.write_user('[secrets]\nvalues = ["hunter2-pass"]\nenv = ["MY_TOKEN"]\n')
    layout.write_project('[secrets]\nvalues = ["hunter2-pass", "other-secret"]\nenv = ["DB_PASSWORD"]\n')
    secrets = layout.load().secrets
    assert secrets.values == ("hunter2-pass", "other-secret")
    assert secrets.env == ("MY_TOKEN", "DB_PASSWORD")


def test_no_workspace_means_no_project_layer(tmp_path: Path) -> None:
    """`workspace=None` reads no project file."""
    layout = Layout.make(tmp_path)
    layout.write_project("max_turns = 3\n")
    loaded = load_config(workspace=None, env=layout.env())
    assert loaded.settings.max_turns == 50
    assert loaded.project_file is None and loaded.project_trusted is False and loaded.project_trust is None


def test_user_file_defaults_to_dot_config(tmp_path: Path) -> None:
    """Without XDG_CONFIG_HOME the user file is ~/.config/strata/config.toml."""
    layout = Layout.make(tmp_path)
    (tmp_path / ".config" / "strata").mkdir(parents=True)
    (tmp_path / ".config" / "strata" / "config.toml").write_text("max_turns = 4\n")
    env = {k: v for k, v in layout.env().items() if k != "XDG_CONFIG_HOME"}
    assert load_config(workspace=None, env=env).settings.max_turns == 4


def test_home_from_strata_home_then_xdg_data_home(tmp_path: Path) -> None:
    """`home` comes from STRATA_HOME, else $XDG_DATA_HOME/strata, else ~/.local/share/strata, or a flag."""
    base = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path)}
    loaded = load_config(workspace=None, env={**base, "STRATA_HOME": str(tmp_path / "h")})
    assert (loaded.settings.home, loaded.sources["home"]) == (tmp_path / "h", "environment variable STRATA_HOME")
    loaded = load_config(workspace=None, env={**base, "XDG_DATA_HOME": str(tmp_path / "d")})
    assert (loaded.settings.home, loaded.sources["home"]) == (tmp_path / "d" / "strata",
                                                              "environment variable XDG_DATA_HOME")
    loaded = load_config(workspace=None, env=base)
    assert (loaded.settings.home, loaded.sources["home"]) == (tmp_path / ".local/share/strata", "built-in defaults")
    loaded = load_config(workspace=None, env=base, flags={"home": tmp_path / "f"})
    assert (loaded.settings.home, loaded.sources["home"]) == (tmp_path / "f", "flag --home")


def test_load_settings_keeps_its_contract(tmp_path: Path) -> None:
    """load_settings(env, **flags): the user file and STRATA_* apply, flags win, None flags are ignored, other
    STRATA_* variables and empty values are not settings."""
    layout = Layout.make(tmp_path)
    layout.write_user("max_turns = 9\nrepair_budget = 4\n")
    env = layout.env(STRATA_DURABILITY="normal", STRATA_MODEL="script:/x.json", STRATA_MAX_TURNS="",
                     STRATA_FAULT="after_commit:1")
    settings = load_settings(env, max_turns=None, model="script:/flag.json")
    assert (settings.home, settings.durability, settings.max_turns, settings.model, settings.repair_budget) == (
        layout.home, "normal", 9, "script:/flag.json", 4)
    assert settings.db_path == layout.home / "strata.db"


@pytest.mark.parametrize(("env", "flags", "key", "origin"), [
    ({"STRATA_MAX_TURNS": "many"}, None, "max_turns", "'many' from environment variable STRATA_MAX_TURNS"),
    ({"STRATA_DURABILITY": "fast"}, None, "durability", "'fast' from environment variable STRATA_DURABILITY"),
    ({"STRATA_LOCK_TIMEOUT_S": "0"}, None, "lock_timeout_s", "'0' from environment variable STRATA_LOCK_TIMEOUT_S"),
    ({}, {"max_turns": 0}, "max_turns", "0 from flag --max-turns"),
    ({}, {"on_ask": "maybe"}, "on_ask", "'maybe' from flag --on-ask"),
])
def test_bad_environment_or_flag_names_its_origin(tmp_path: Path, env: dict[str, str],
                                                  flags: dict[str, object] | None, key: str, origin: str) -> None:
    """A bad STRATA_* value or flag is a ConfigError naming the key, the value and the variable or flag."""
    layout = Layout.make(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_config(workspace=None, env=layout.env(**env), flags=flags)
    assert info.value.key == key
    assert origin in str(info.value)
    assert "\n" not in str(info.value)


def test_unknown_flag_is_an_error(tmp_path: Path) -> None:
    """A flag that is no setting is refused rather than dropped."""
    with pytest.raises(ConfigError, match="unknown setting"):
        load_config(workspace=None, env=Layout.make(tmp_path).env(), flags={"max_turn": 3})


def test_read_config_file_hashes_the_parsed_bytes(tmp_path: Path) -> None:
    """The sha256 trust records is over exactly the bytes that were validated."""
    import hashlib

    path = Layout.make(tmp_path).write_project("max_turns = 3\n")
    doc = read_config_file(path)
    assert doc.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert doc.data.max_turns == 3
