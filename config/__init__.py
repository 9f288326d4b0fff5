"""Configuration: TOML files validated by pydantic, layered as built-in defaults < user file < project file <
environment (`STRATA_*`) < flags, and project trust (a project's hooks and allow rules apply only once trusted)."""

from config._read import ConfigDoc, read_config_file
from config.channels import ChannelEntry, ChannelsConfig
from config.hook_files import FileProblem, HookFiles
from config.hook_spec import HOOK_EVENTS, HookSpec
from config.knowledge import DatasetDecl, KnowledgeConfig, dataset_roots, found_datasets, user_knowledge_dir
from config.loader import LoadedConfig, Secrets, ToolDeadline, load_config, load_settings, untrusted_notice
from config.mcp import McpConfig, McpServeConfig, McpServerDecl, McpToolPolicy
from config.schema import ConfigFile, HookEntry, RuleEntry
from config.settings import (
    PROJECT_DIR,
    SETTING_KEYS,
    Settings,
    default_home,
    env_var,
    flag_name,
    project_config_path,
    user_config_path,
)
from config.trust import TrustRecord, TrustState, is_trusted, trust_project, trust_state, trust_store_path, untrust
from core.vocabulary import Durability, OnAsk

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
    "read_config_file",
    "trust_project",
    "trust_state",
    "trust_store_path",
    "untrust",
    "untrusted_notice",
    "user_config_path",
    "user_knowledge_dir",
]
