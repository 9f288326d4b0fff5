"""Configuration: TOML files validated by pydantic, layered as built-in defaults < user file < project file <
environment (`STRATA_*`) < flags, and project trust (a project's hooks and allow rules apply only once trusted)."""

from typing import TYPE_CHECKING

from core.lazy_exports import lazy_exports as _lazy_exports

if TYPE_CHECKING:  # imported when first used (core/lazy_exports.py)
    from config._read import ConfigDoc, read_config_file
    from config._trust_state import TrustState
    from config.channels import ChannelEntry, ChannelsConfig
    from config.hook_files import FileProblem, HookFiles
    from config.hook_spec import HOOK_EVENTS, HookSpec
    from config.knowledge import (
        DatasetDecl,
        KnowledgeConfig,
        dataset_roots,
        found_datasets,
        project_roots,
        user_knowledge_dir,
    )
    from config.loader import LoadedConfig, Secrets, ToolDeadline, load_config, load_settings, untrusted_notice
    from config.locations import (
        PROJECT_DIR,
        SETTING_KEYS,
        default_home,
        env_var,
        project_config_path,
        user_config_path,
    )
    from config.mcp import McpConfig, McpServeConfig, McpServerDecl, McpToolPolicy
    from config.schema import ConfigFile, HookEntry, RuleEntry
    from config.settings import Settings, flag_name
    from config.trust import TrustRecord, is_trusted, trust_project, trust_state, trust_store_path, untrust
    from core.vocabulary import Durability, OnAsk

_EXPORTS: dict[str, tuple[str, str]] = {
    "ConfigDoc": ("config._read", "ConfigDoc"),
    "read_config_file": ("config._read", "read_config_file"),
    "ChannelEntry": ("config.channels", "ChannelEntry"),
    "ChannelsConfig": ("config.channels", "ChannelsConfig"),
    "FileProblem": ("config.hook_files", "FileProblem"),
    "HookFiles": ("config.hook_files", "HookFiles"),
    "HOOK_EVENTS": ("config.hook_spec", "HOOK_EVENTS"),
    "HookSpec": ("config.hook_spec", "HookSpec"),
    "DatasetDecl": ("config.knowledge", "DatasetDecl"),
    "KnowledgeConfig": ("config.knowledge", "KnowledgeConfig"),
    "dataset_roots": ("config.knowledge", "dataset_roots"),
    "project_roots": ("config.knowledge", "project_roots"),
    "found_datasets": ("config.knowledge", "found_datasets"),
    "user_knowledge_dir": ("config.knowledge", "user_knowledge_dir"),
    "LoadedConfig": ("config.loader", "LoadedConfig"),
    "Secrets": ("config.loader", "Secrets"),
    "ToolDeadline": ("config.loader", "ToolDeadline"),
    "load_config": ("config.loader", "load_config"),
    "load_settings": ("config.loader", "load_settings"),
    "untrusted_notice": ("config.loader", "untrusted_notice"),
    "McpConfig": ("config.mcp", "McpConfig"),
    "McpServeConfig": ("config.mcp", "McpServeConfig"),
    "McpServerDecl": ("config.mcp", "McpServerDecl"),
    "McpToolPolicy": ("config.mcp", "McpToolPolicy"),
    "ConfigFile": ("config.schema", "ConfigFile"),
    "HookEntry": ("config.schema", "HookEntry"),
    "RuleEntry": ("config.schema", "RuleEntry"),
    "PROJECT_DIR": ("config.locations", "PROJECT_DIR"),
    "SETTING_KEYS": ("config.locations", "SETTING_KEYS"),
    "Settings": ("config.settings", "Settings"),
    "default_home": ("config.locations", "default_home"),
    "env_var": ("config.locations", "env_var"),
    "flag_name": ("config.settings", "flag_name"),
    "project_config_path": ("config.locations", "project_config_path"),
    "user_config_path": ("config.locations", "user_config_path"),
    "TrustRecord": ("config.trust", "TrustRecord"),
    "TrustState": ("config._trust_state", "TrustState"),
    "is_trusted": ("config.trust", "is_trusted"),
    "trust_project": ("config.trust", "trust_project"),
    "trust_state": ("config.trust", "trust_state"),
    "trust_store_path": ("config.trust", "trust_store_path"),
    "untrust": ("config.trust", "untrust"),
    "Durability": ("core.vocabulary", "Durability"),
    "OnAsk": ("core.vocabulary", "OnAsk"),
}
"""Each public name: the module that defines it, and its name there."""

__all__ = [
    "HOOK_EVENTS",
    "PROJECT_DIR",
    "SETTING_KEYS",
    "ChannelEntry",
    "ChannelsConfig",
    "ConfigDoc",
    "ConfigFile",
    "DatasetDecl",
    "Durability",
    "FileProblem",
    "HookEntry",
    "HookFiles",
    "HookSpec",
    "KnowledgeConfig",
    "LoadedConfig",
    "McpConfig",
    "McpServeConfig",
    "McpServerDecl",
    "McpToolPolicy",
    "OnAsk",
    "RuleEntry",
    "Secrets",
    "Settings",
    "ToolDeadline",
    "TrustRecord",
    "TrustState",
    "dataset_roots",
    "default_home",
    "env_var",
    "flag_name",
    "found_datasets",
    "is_trusted",
    "load_config",
    "load_settings",
    "project_config_path",
    "project_roots",
    "read_config_file",
    "trust_project",
    "trust_state",
    "trust_store_path",
    "untrust",
    "untrusted_notice",
    "user_config_path",
    "user_knowledge_dir",
]


__getattr__ = _lazy_exports(__name__, _EXPORTS, globals())
