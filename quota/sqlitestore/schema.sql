-- Schema version 2 of the sqlitestore database; schema_v3.sql completes
-- version 3 (PRAGMA user_version = 3).
-- Version 1 had no creds.owner; Open adds it in place (migrateV1).
-- Times are microseconds since the Unix epoch (UTC), costs are units.

-- APIs the store knows: named by DefineBudgets or RememberCredential.
CREATE TABLE apis (
	name TEXT PRIMARY KEY
) WITHOUT ROWID;

-- Budget definitions, so another process (quotactl) can load them.
CREATE TABLE budgets (
	api      TEXT    NOT NULL,
	name     TEXT    NOT NULL,
	"limit"  INTEGER NOT NULL,
	"window" TEXT    NOT NULL, -- quota.Window text form: sliding:24h0m0s, daily:America/Los_Angeles, monthly:Europe/Paris
	unit     TEXT    NOT NULL DEFAULT '', -- quota.Budget.Unit, '' for the default; added to older files at open (ensureUnit)
	PRIMARY KEY (api, name)
) WITHOUT ROWID;

-- Credentials by fingerprint (never the secret), with the caller's label
-- (unique per API, enforced by quota.ApplyCredentialUpdate inside one
-- immediate transaction) and owner: the account its budgets are kept under,
-- '' when the credential is its own owner (sums.cred is then the
-- fingerprint, as in version 1).
CREATE TABLE creds (
	api   TEXT NOT NULL,
	fp    TEXT NOT NULL,
	label TEXT NOT NULL DEFAULT '',
	owner TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (api, fp)
) WITHOUT ROWID;

-- One row per log: the (api, account, budget) triple; cred is the account
-- (an owner name, or a fingerprint). used is the running
-- sum of the costs of the log's rows in entries, so a decision never sums the
-- window.
CREATE TABLE sums (
	id              INTEGER PRIMARY KEY,
	api             TEXT    NOT NULL,
	cred            TEXT    NOT NULL,
	budget          TEXT    NOT NULL,
	"window"        TEXT    NOT NULL, -- the window the log was last used with
	used            INTEGER NOT NULL DEFAULT 0,
	exhausted_until INTEGER NOT NULL DEFAULT 0, -- 0: not marked
	-- An instant by which every entry has expired and any exhaustion mark
	-- has ended: from then on the log holds nothing and the sweep may drop
	-- it. Never earlier than the truth (it may be later).
	idle_after      INTEGER NOT NULL DEFAULT 0,
	UNIQUE (api, cred, budget)
);
CREATE INDEX sums_idle ON sums (idle_after);

-- One row per budget per granted call; the cost is inside the row.
CREATE TABLE entries (
	log   INTEGER NOT NULL, -- sums.id
	at    INTEGER NOT NULL,
	cost  INTEGER NOT NULL,
	nonce TEXT    NOT NULL
);
-- Serves pruning (at < start), the oldest-first walk for RetryAt (rowid
-- breaks ties in insertion order) and refunds (log, at, then nonce).
CREATE INDEX entries_log_at ON entries (log, at);

-- quota.StateStore: small named values...
CREATE TABLE state (
	key   TEXT PRIMARY KEY,
	value BLOB NOT NULL
) WITHOUT ROWID;

-- ...and bounded record streams, seq increasing per stream.
CREATE TABLE records (
	stream TEXT    NOT NULL,
	seq    INTEGER NOT NULL,
	rec    BLOB    NOT NULL,
	PRIMARY KEY (stream, seq)
) WITHOUT ROWID;

-- quota.StateStore leases: one row per key ever leased. The row stays after
-- release (holder '', expires 0) so that the fencing token keeps growing.
CREATE TABLE IF NOT EXISTS leases (
	key     TEXT    PRIMARY KEY,
	holder  TEXT    NOT NULL,
	token   INTEGER NOT NULL,
	expires INTEGER NOT NULL -- µs; the lease is live while expires > now
) WITHOUT ROWID;
