-- Schema version 4 adds to version 3 (applied to new files after
-- schema_v3.sql, and to older files when they are opened).

-- entries.held marks a lease's block (quota.TakeRequest.Hold): Adjust keeps
-- the held entries stamped past its now and replaces every other entry,
-- whatever its stamp (after the clock stepped back, plain entries are
-- stamped past now too).
ALTER TABLE entries ADD COLUMN held INTEGER NOT NULL DEFAULT 0;
