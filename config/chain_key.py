"""The chain key: the secret of the timeline's and the state log's HMAC chains, hex-encoded in `<home>/chain.key`
(mode 0600), never in the database. Someone who can write the database but not read this file cannot make a row
that verifies; someone who can read the home can (see the README's guarantees).

Unlike the masking key it is created only for a database that has no chain yet: a database chained under a key
that is missing here must not be continued under a new one (its sessions would stop verifying), so `load` then
answers None and the store says why (memory/chain_binding.py)."""

from __future__ import annotations

from pathlib import Path

from config._key_file import create_key, read_key

KEY_FILE = "chain.key"


def chain_key_path(home: Path) -> Path:
    return home / KEY_FILE


def load_chain_key(home: Path, *, create: bool) -> bytes | None:
    """The home's chain key; created first when absent and `create` is set, else None when absent. A ConfigError
    for a key file that cannot be read or is malformed."""
    path = chain_key_path(home)
    if not path.exists():
        if not create:
            return None
        create_key(path)
    return read_key(path, "chain key", hint="restore the chain.key this home's database was chained with; "
                                             "without it no session here can be verified or continued")
