-- A snapshot's turn record (persistence/summary.go): the snapshot without
-- its summary, rewritten by every save, while data, the whole snapshot,
-- is rewritten only when the summary changed. NULL for a snapshot saved
-- before, which loads from data alone.
ALTER TABLE snapshots ADD COLUMN turn json;
