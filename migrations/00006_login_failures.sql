-- Failed sign-ins, for throttling across replicas: one row per failure, keyed by account and by source address.
-- Rows older than the throttling window are deleted as new failures come in.

-- +goose Up
CREATE TABLE login_failures (
    key text        NOT NULL, -- "account:<email>" or "address:<ip>"
    at  timestamptz NOT NULL
);
CREATE INDEX login_failures_key_at ON login_failures (key, at);

-- +goose Down
DROP TABLE login_failures;
