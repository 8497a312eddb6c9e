-- Each chat's last requests (persistence/requestlog.go), one row a request,
-- numbered from 1 per chat as they are logged; a save writes only the new
-- or changed ones and deletes those that left the log. A snapshot saved
-- before holds its log inline, and its next save moves it here.
CREATE TABLE request_log (
    chat_id text COLLATE "C" NOT NULL,
    n       bigint NOT NULL,
    data    json NOT NULL,
    PRIMARY KEY (chat_id, n)
);
