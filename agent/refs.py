"""How people name a session: `last`, or a prefix of its id at least `MIN_PREFIX` characters long (agent/ids.py
resolves them against the store; the quick way of `strata timeline` against the database directly)."""

MIN_PREFIX = 8
LAST = "last"
