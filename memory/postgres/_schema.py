"""The PostgreSQL schema, as numbered migrations applied in order under an advisory lock (several workers may
open one database at once). The same concepts as the SQLite schema (memory/migrations.py): sessions with their
lease and the heads of both logs, the state log, the timeline, receipts, blobs, snapshots, and the id of the key
the chains are made with; and (002) the channel book, shared by the daemons working on this database
(memory/channel_book/). Times are ISO text, as the chains hash them.

Append-only is enforced by the database, not only by the code: a trigger refuses any UPDATE or DELETE of an
event or a timeline row, whoever sends it."""

from __future__ import annotations

MIGRATION_LOCK = 0x5374726174610001
"""The advisory lock key migrations run under ("Strata" and 1)."""

MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("001_initial", """
CREATE TABLE strata_schema (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE chain_key (id int PRIMARY KEY CHECK (id = 1), key_id text NOT NULL, bound_at text NOT NULL);
CREATE TABLE sessions (
    id text PRIMARY KEY,
    created_at text NOT NULL,
    updated_at text NOT NULL,
    mode text NOT NULL,
    workspace text NOT NULL,
    model text NOT NULL,
    title text,
    parent_id text,
    fork_seq bigint,
    status text NOT NULL,
    lease_token text,
    lease_pid bigint,
    lease_host text,
    lease_proc_start text,
    lease_expires text,
    lease_boot text,
    lease_pid_ns text,
    head_events_seq bigint NOT NULL DEFAULT 0,
    head_events_hash text,
    head_timeline_seq bigint NOT NULL DEFAULT 0,
    head_timeline_hash text,
    chain_note text
);
CREATE INDEX sessions_created ON sessions (created_at, id);
CREATE TABLE events (
    session_id text NOT NULL REFERENCES sessions (id),
    seq bigint NOT NULL,
    kind text NOT NULL,
    at text NOT NULL,
    turn int NOT NULL,
    payload text NOT NULL,
    schema_version int NOT NULL,
    hash text NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE timeline (
    session_id text NOT NULL REFERENCES sessions (id),
    seq bigint NOT NULL,
    kind text NOT NULL,
    turn int,
    tool text,
    decision text,
    at text NOT NULL,
    call_id text,
    check_name text,
    outcome text,
    duration_ms double precision,
    prev_hash text NOT NULL,
    hash text NOT NULL,
    summary text,
    data text,
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX timeline_call_decisions ON timeline (session_id, kind, decision);
CREATE TABLE receipts (
    id text PRIMARY KEY,
    session_id text NOT NULL REFERENCES sessions (id),
    call_id text NOT NULL,
    tool text NOT NULL,
    status text NOT NULL,
    idempotency_key text NOT NULL UNIQUE,
    args_sha256 text NOT NULL,
    resource_keys text NOT NULL,
    created_at text NOT NULL,
    updated_at text NOT NULL,
    outcome_sha256 text,
    note text,
    reconciled_by text,
    process text,
    UNIQUE (session_id, call_id)
);
CREATE INDEX receipts_status ON receipts (status);
CREATE TABLE blobs (sha256 text PRIMARY KEY, size bigint NOT NULL, data bytea NOT NULL);
CREATE TABLE snapshots (
    session_id text PRIMARY KEY REFERENCES sessions (id),
    seq bigint NOT NULL,
    version text NOT NULL,
    at text NOT NULL,
    data bytea NOT NULL
);
CREATE FUNCTION strata_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'strata: % rows are append-only (% refused)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END
$$;
CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION strata_append_only();
CREATE TRIGGER timeline_append_only BEFORE UPDATE OR DELETE ON timeline
    FOR EACH ROW EXECUTE FUNCTION strata_append_only();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION strata_append_only();
CREATE TRIGGER timeline_no_truncate BEFORE TRUNCATE ON timeline
    FOR EACH STATEMENT EXECUTE FUNCTION strata_append_only();
"""),
    ("002_channel_book", """
CREATE TABLE channel_threads (channel text NOT NULL, thread_id text NOT NULL, session_id text NOT NULL,
    created_at text NOT NULL, PRIMARY KEY (channel, thread_id));
CREATE TABLE channel_intake (num bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, channel text NOT NULL,
    message_id text NOT NULL, thread_id text NOT NULL, session_id text NOT NULL, sender text NOT NULL,
    status text NOT NULL, rule text NOT NULL, reply_key text NOT NULL, after_seq bigint NOT NULL, at text NOT NULL,
    UNIQUE (channel, message_id));
CREATE TABLE channel_tasks (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, channel text NOT NULL,
    thread_id text NOT NULL, message_id text NOT NULL, session_id text NOT NULL, status text NOT NULL,
    rule text NOT NULL, created_at text NOT NULL, UNIQUE (channel, message_id));
CREATE TABLE channel_claims (channel text NOT NULL, thread_id text NOT NULL, token text NOT NULL,
    pid bigint NOT NULL, host text NOT NULL, proc_start text NOT NULL, boot_id text NOT NULL, pid_ns text NOT NULL,
    expires_at text NOT NULL, PRIMARY KEY (channel, thread_id));
"""),
    # Schema only in name: a proposal's payload may leave its calls out (core/events.py `BatchProposed`), which a
    # Strata before this one cannot read. The step keeps such a Strata out of the database ("schema migrations this
    # Strata does not know") rather than letting it report every new proposal as a damaged event.
    ("003_proposals_without_calls", """
COMMENT ON COLUMN events.payload IS 'The event''s JSON as core/events.py storable_json writes it: since 003 a '
    'proposal''s calls may be left out, when they are its content''s tool_use blocks (read back from them).';
"""),
)
