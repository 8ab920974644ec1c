-- Schema version 3 adds to version 2 (applied to new files after
-- schema.sql, and to version 1 and 2 files when they are opened).

-- quota.Store.Breakdown: units per hour, budget, method and job, for one
-- owner. keep is when the row may be dropped (µs): the end of its hour plus
-- the budget's window.
CREATE TABLE usage_hours (
	api    TEXT    NOT NULL,
	owner  TEXT    NOT NULL,
	hour   INTEGER NOT NULL, -- µs, on the hour (UTC)
	budget TEXT    NOT NULL,
	method TEXT    NOT NULL,
	job    TEXT    NOT NULL,
	units  INTEGER NOT NULL,
	keep   INTEGER NOT NULL,
	PRIMARY KEY (api, owner, hour, budget, method, job)
) WITHOUT ROWID;
CREATE INDEX usage_hours_keep ON usage_hours (keep);

-- quota.Store.MarkCrossing: one mark per threshold, held until it lapses.
CREATE TABLE crossings (
	api     TEXT    NOT NULL,
	owner   TEXT    NOT NULL,
	budget  TEXT    NOT NULL,
	percent INTEGER NOT NULL,
	until   INTEGER NOT NULL, -- µs
	PRIMARY KEY (api, owner, budget, percent)
) WITHOUT ROWID;
