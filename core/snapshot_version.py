"""The version a snapshot of a session's state is stored with (core/snapshot.py): a snapshot of another version is
ignored and the log folded instead. Apart from the snapshot code, so that a reader can tell whether a snapshot is
current without importing the state's models (memory/quick_read.py)."""

SNAPSHOT_FORMAT = 2
"""2: tool inputs counted by repr in the conversation-size estimate (1 counted their JSON)."""
STATE_SCHEMA_DIGEST = "d35d6c8c219b22cf"
"""`state_schema_digest()` of this code (checked by tests/core/test_snapshot.py); computing it costs a schema
generation, so it is not done on every resume."""
SNAPSHOT_VERSION = f"{SNAPSHOT_FORMAT}:{STATE_SCHEMA_DIGEST}"
