-- Each cluster's own CA: it signs the certificates its nodes' API proxies present to the cluster's pods (the
-- in-cluster endpoint of the `kubernetes` Service, docs/design/incluster.md), and is published in every
-- namespace's kube-root-ca.crt. Kept in the database so every replica signs with the same CA; created on first use.

-- +goose Up
CREATE TABLE cluster_cas (
    cluster_id text        PRIMARY KEY REFERENCES clusters (id) ON DELETE CASCADE,
    cert_pem   text        NOT NULL,
    key_pem    text        NOT NULL, -- PKCS#8
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE cluster_cas;
