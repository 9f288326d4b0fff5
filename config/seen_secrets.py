"""Known secrets a home's sessions hold, remembered for later processes.

A known secret is the value of a secret-named environment variable or one configured under `[secrets]`. A run
masks it wherever it shows, but a later process (an export made in another shell, without that variable) would
not know it, and the session log keeps text raw. So when masking finds a known secret in session text, its value
is appended to `<home>/masking.seen` (mode 0600, one JSON string per line), and every process of that home masks
it from then on. Only values found in text a session holds are written, and those are in the home's database
already; a value that merely sits in the environment is never written."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from config.masking_key import KEY_BYTES, load_masking_key
from config.private_files import open_private
from core.masking import Masker

SEEN_FILE = "masking.seen"


class SeenSecrets:
    def __init__(self, home: Path) -> None:
        self.path = home / SEEN_FILE
        self._lock = threading.Lock()
        self.values: list[str] = self._load()
        self._known = set(self.values)

    def _load(self) -> list[str]:
        try:
            lines = self.path.read_text("utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            return []  # none yet (or unreadable: masking goes on with what the process knows)
        values = []
        for line in lines:
            with contextlib.suppress(ValueError, RecursionError):  # a damaged line: skipped
                value = json.loads(line)
                if isinstance(value, str) and value:
                    values.append(value)
        return values

    def add(self, value: str) -> None:
        """Remember `value` (thread-safe; the ledger masks on its own thread). Never raises: masking must not
        fail what it observes."""
        if value in self._known:
            return
        with self._lock:
            if value in self._known:
                return
            self._known.add(value)
            with contextlib.suppress(OSError):
                fd = open_private(self.path, os.O_WRONLY | os.O_APPEND)
                with os.fdopen(fd, "a", encoding="utf-8") as f:
                    f.write(json.dumps(value, ensure_ascii=False) + "\n")


def carry_seen(source: Path, target: Path) -> int:
    """Append to `target`'s masking.seen (created 0600) the values of `source`'s it does not hold yet, so sessions
    copied there are masked as they were here; how many were added. Raises OSError."""
    values = SeenSecrets(source).values
    held = set(SeenSecrets(target).values)
    new = [v for v in dict.fromkeys(values) if v not in held]
    if not new:
        return 0
    text = "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in new).encode("utf-8")
    fd = open_private(target / SEEN_FILE, os.O_RDWR | os.O_APPEND)
    with os.fdopen(fd, "a+b") as f:
        size = f.seek(0, os.SEEK_END)
        if size:  # a torn last line must not swallow the first value
            f.seek(size - 1)
            if f.read(1) != b"\n":
                text = b"\n" + text
        f.write(text)
    return len(new)


def home_masker(home: Path, env: Mapping[str, str], extra_secrets: Iterable[str] = (), *,
                read_only: bool = False) -> Masker:
    """The masker of a home: its key, the environment's and the configured secrets, the ones its sessions were
    seen to hold; and it remembers new ones as it finds them (when the home takes them). `read_only`: a reading
    command; a home that has no key and cannot be given one is masked with a one-off key (there is nothing its
    fingerprints could have correlated with)."""
    seen = SeenSecrets(home)
    try:
        key = load_masking_key(home)
    except OSError:  # the key is missing and the home cannot take one
        if not read_only:
            raise
        key = secrets.token_bytes(KEY_BYTES)
    masker = Masker.from_env(key, env, extra_secrets=[*extra_secrets, *seen.values])
    masker.on_known = seen.add
    return masker
