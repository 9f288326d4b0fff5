"""Settings: built-in defaults and environment (`STRATA_*`). The pipeline issue adds TOML files and trust."""

from config.settings import Settings, load_settings

__all__ = ["Settings", "load_settings"]
