-- Per-cluster keys that sign ServiceAccount tokens, kept in the database so every replica signs and verifies
-- with the same key. A cluster's key goes with the cluster.

-- +goose Up
CREATE TABLE cluster_signing_keys (
    cluster_id  text        PRIMARY KEY REFERENCES clusters (id) ON DELETE CASCADE,
    private_key text        NOT NULL, -- PKCS#8, PEM
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE cluster_signing_keys;
