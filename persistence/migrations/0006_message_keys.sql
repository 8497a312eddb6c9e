-- Each chat's idempotency keys (persistence/keys.go; docs/api.md, "Sending
-- again safely"): the key a message was sent with, beside its value (which
-- carries it too, as idempotency_key), so a key is found in the chat's
-- whole log, a part folded out of what its session keeps included. A
-- column, not an index on the value: json's operators refuse a value
-- holding \u0000, which a message may. NULL for a message sent without a
-- key, and for those stored before this migration.
ALTER TABLE messages ADD COLUMN idempotency_key text COLLATE "C";
CREATE INDEX messages_by_key ON messages (chat_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
