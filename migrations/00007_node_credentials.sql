-- Node credentials: what a node's agent gets for its join token, bound to one node name of one cluster. Only the
-- SHA-256 of the credential is stored. One live credential per node name.

-- +goose Up
CREATE TABLE node_credentials (
    id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    cluster_id    text        NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    node_name     text        NOT NULL CHECK (node_name <> ''),
    hash          bytea       NOT NULL UNIQUE CHECK (octet_length(hash) = 32),
    join_token_id text,
    created_at    timestamptz NOT NULL,
    last_used_at  timestamptz,
    revoked_at    timestamptz
);
CREATE UNIQUE INDEX node_credentials_live ON node_credentials (cluster_id, node_name) WHERE revoked_at IS NULL;

-- +goose Down
DROP TABLE node_credentials;
