"""Constants the config, the corpus reader and the tools agree on, in a module that imports nothing: config and
the CLI read them at start-up without loading the knowledge models."""

DATASET_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
"""A dataset name is a directory name and a config key: letters, digits, `_`, `.`, `-`; at most 64 characters."""

MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
"""A larger file is reported (`too_large`), not indexed: a procedure is not a data dump."""

DOCUMENT_SUFFIXES = (".md", ".markdown", ".txt", ".text")
"""Which files under a dataset root are documents (others are not read, and not reported)."""

DEFAULT_LIMIT = 5
MAX_LIMIT = 20
"""How many hits a search returns by default, and at most."""
