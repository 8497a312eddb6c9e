-- The store's tables: the same things Badger holds (doc.go's key layout),
-- one table each. Values are the same JSON envelopes {"v": version, "d":
-- data}, kept as json (not jsonb, which refuses the \u0000 a message may
-- carry). Ids sort bytewise (COLLATE "C"), as Badger's keys do, so pages and
-- record listings come in the same order on both backends.

CREATE TABLE chats (
    id     text COLLATE "C" PRIMARY KEY,
    tenant text COLLATE "C" NOT NULL,
    data   json NOT NULL
);
-- The tenant's index: count and page a tenant's chats without the others.
CREATE INDEX chats_by_tenant ON chats (tenant, id);

-- Each chat's append-only log; the primary key finds a chat's last seq.
-- The seq is the row's (the stored message carries 0: postgres.go appendTx).
CREATE TABLE messages (
    chat_id text COLLATE "C" NOT NULL,
    seq     bigint NOT NULL,
    data    json NOT NULL,
    PRIMARY KEY (chat_id, seq)
);

CREATE TABLE snapshots (
    chat_id text COLLATE "C" PRIMARY KEY,
    data    json NOT NULL
);

-- Windows learned from refusals, the smallest one kept.
CREATE TABLE learned_windows (
    provider text COLLATE "C" NOT NULL,
    model    text COLLATE "C" NOT NULL,
    size     integer NOT NULL,
    PRIMARY KEY (provider, model)
);

-- Generic records: memories, learning runs, marks, toolsets, attachments'
-- metadata (the bytes stay in the attachments directory).
CREATE TABLE records (
    kind text COLLATE "C" NOT NULL,
    id   text COLLATE "C" NOT NULL,
    data json NOT NULL,
    PRIMARY KEY (kind, id)
);
