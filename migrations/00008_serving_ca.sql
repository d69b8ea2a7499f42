-- The CA that signs every replica's serving certificate, shared through the database so that one pinned CA
-- (in kubeconfigs and join tokens) covers all replicas. The first server to start stores its CA here.

-- +goose Up
CREATE TABLE serving_ca (
    id         smallint    PRIMARY KEY CHECK (id = 1),
    cert_pem   text        NOT NULL,
    key_pem    text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE serving_ca;
