-- Each chat's activity log (persistence/activity.go): folds, heals,
-- problems, tools loaded, memories learned, numbered from 1 per chat.
-- after_seq orders an item among the chat's messages.
CREATE TABLE activity (
    chat_id text COLLATE "C" NOT NULL,
    id      bigint NOT NULL,
    data    json NOT NULL,
    PRIMARY KEY (chat_id, id)
);
