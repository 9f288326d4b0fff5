"""The masker of a reading command's quick way (agent/cli/quick_sessions.py, quick_timeline.py, quick_receipts.py):
the one the full way builds (agent/reading.py `reading_masker`: the home's key, the environment's secrets, the user
file's, the ones its sessions were seen to hold), built only where building it writes nothing, and watched for
what the full way would write: a known secret met in what is printed that the home has not remembered yet (the
full way appends it to `masking.seen`). The caller leaves the command to the full way then (`wrote`)."""

from __future__ import annotations

import os

from config.masking_key import KEY_FILE
from config.quick import QuickConfig
from config.seen_secrets import SeenSecrets, home_masker
from core.masking import Masker


class QuickMasker:
    """The home's masker as a reading command uses it, noting each known secret the home has not remembered."""

    def __init__(self, masker: Masker, remembered: set[str]) -> None:
        self.masker = masker
        self._remembered = remembered
        self._unremembered: list[str] = []
        masker.on_known = self._met

    @classmethod
    def of(cls, config: QuickConfig) -> QuickMasker | None:
        """None when the home has no masking key: the full way creates it (the quick way writes nothing)."""
        if not (config.home / KEY_FILE).is_file():
            return None
        masker = home_masker(config.home, os.environ, extra_secrets=config.secrets, read_only=True)
        return cls(masker, set(SeenSecrets(config.home).values))

    def _met(self, value: str) -> None:
        if value not in self._remembered:
            self._unremembered.append(value)

    def mask(self, text: str) -> str:
        return self.masker.mask(text)

    @property
    def wrote(self) -> bool:
        """Whether the full way would have written to the home while masking what was masked so far."""
        return bool(self._unremembered)
