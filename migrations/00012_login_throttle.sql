-- Sign-in throttling (tenancy/throttle.go), in place of login_failures: one counter row per key, which every
-- attempt increments in one upsert before the password is checked, so concurrent attempts are each evaluated
-- against the true count. Keys:
--   "account:<email>"           failures of an account from any address, per window (window_start + an hour)
--   "address:<address>"         failures from an address (an IPv6 /64) on any account, per window
--   "pair:<address> <email>"    consecutive failures of an account from one address: the growing back-off
-- Rows whose last attempt is older than the window are deleted as failures come in. login_failures (00006) is
-- no longer written; it stays for replicas of the previous release during a rolling upgrade, for a later
-- migration to drop.

-- +goose Up
CREATE TABLE login_throttle (
    key          text        PRIMARY KEY,
    failures     integer     NOT NULL CHECK (failures >= 0),
    window_start timestamptz NOT NULL, -- account and address keys: the start of the counting window
    last_at      timestamptz NOT NULL, -- the latest counted attempt
    retry_at     timestamptz           -- pair keys: no attempt is evaluated before this (the back-off)
);
CREATE INDEX login_throttle_last_at ON login_throttle (last_at);

-- +goose Down
DROP TABLE login_throttle;
