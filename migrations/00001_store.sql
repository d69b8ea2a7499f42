-- The object store: see docs/design/store.md. Never edit a released migration; add a new one.

-- +goose Up
-- wh_meta.rev is the highest committed revision. Writers take this row's lock with
-- "UPDATE wh_meta SET rev = rev + n" as their first statement and hold it until COMMIT, which is what makes
-- revisions increase in commit order.
CREATE TABLE wh_meta (
    id  smallint PRIMARY KEY CHECK (id = 1),
    rev bigint   NOT NULL CHECK (rev >= 0)
);
INSERT INTO wh_meta (id, rev) VALUES (1, 0);

-- wh_compact.rev: history at or below it has been compacted.
CREATE TABLE wh_compact (
    id  smallint PRIMARY KEY CHECK (id = 1),
    rev bigint   NOT NULL CHECK (rev >= 0)
);
INSERT INTO wh_compact (id, rev) VALUES (1, 0);

-- Current state of every object, keyed like the API: (cluster, resource, namespace, name).
CREATE TABLE objects (
    cluster    text   NOT NULL,
    resource   text   NOT NULL,
    namespace  text   NOT NULL,
    name       text   NOT NULL,
    rev        bigint NOT NULL,
    create_rev bigint NOT NULL,
    value      bytea  NOT NULL,
    PRIMARY KEY (cluster, resource, namespace, name)
);

-- Every change, by revision. type: 1 = created, 2 = modified, 3 = deleted (value = the last state).
CREATE TABLE history (
    rev        bigint   PRIMARY KEY,
    cluster    text     NOT NULL,
    resource   text     NOT NULL,
    namespace  text     NOT NULL,
    name       text     NOT NULL,
    type       smallint NOT NULL CHECK (type IN (1, 2, 3)),
    create_rev bigint   NOT NULL,
    prev_rev   bigint   NOT NULL,
    value      bytea    NOT NULL
);
-- Reads at a past revision: the latest version of each key at or below R.
CREATE INDEX history_key_rev ON history (cluster, resource, namespace, name, rev DESC);

-- +goose Down
DROP TABLE history;
DROP TABLE objects;
DROP TABLE wh_compact;
DROP TABLE wh_meta;
