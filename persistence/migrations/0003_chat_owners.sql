-- Single writer per chat (issue 23): each chat's owner epoch. A session
-- claims its chat when it starts (the epoch goes up by one); every append
-- and snapshot of that session checks, in its own transaction and under a
-- share lock on this row, that the epoch is still the one it claimed, so a
-- stale owner's write fails instead of forking the log (postgres.go Claim).
CREATE TABLE chat_owners (
    chat_id text COLLATE "C" PRIMARY KEY,
    epoch   bigint NOT NULL
);
