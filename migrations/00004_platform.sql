-- Platform: one owner per team, invitations, node join tokens, the audit log and browser sessions.
-- See tenancy/doc.go. Never edit a released migration; add a new one.
--
-- Secrets (invitation tokens, join-token secrets, session ids, CSRF tokens) are stored only as their SHA-256.

-- +goose Up
-- Exactly one owner per team: the index allows at most one; TransferOwnership swaps it in one transaction and
-- the owner cannot be removed or demoted otherwise.
CREATE UNIQUE INDEX memberships_one_owner ON memberships (team_id) WHERE role = 'owner';

-- An invitation is pending while accepted_at and revoked_at are NULL and expires_at is in the future.
CREATE TABLE invitations (
    id          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    team_id     text        NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    email       text        NOT NULL CHECK (email <> '' AND email = lower(email)),
    role        text        NOT NULL CHECK (role IN ('admin', 'member', 'viewer')),
    token_hash  bytea       NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    invited_by  uuid        REFERENCES users (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    accepted_at timestamptz,
    accepted_by uuid        REFERENCES users (id) ON DELETE SET NULL,
    revoked_at  timestamptz,
    CHECK (accepted_at IS NULL OR revoked_at IS NULL)
);
CREATE INDEX invitations_team_email ON invitations (team_id, email);

-- A join token is "K10<CA hash>::<id>.<secret>"; id is public (shown in lists), the secret only hashed.
CREATE TABLE join_tokens (
    id           text        PRIMARY KEY CHECK (id ~ '^[a-z0-9]{6}$'),
    cluster_id   text        NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    secret_hash  bytea       NOT NULL CHECK (octet_length(secret_hash) = 32),
    description  text        NOT NULL DEFAULT '',
    created_by   uuid        REFERENCES users (id) ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    max_uses     integer     CHECK (max_uses > 0), -- NULL: unlimited
    uses         integer     NOT NULL DEFAULT 0 CHECK (uses >= 0 AND (max_uses IS NULL OR uses <= max_uses)),
    revoked_at   timestamptz,
    last_used_at timestamptz
);
CREATE INDEX join_tokens_cluster ON join_tokens (cluster_id);

-- Audit entries outlive the teams and clusters they name, so team_id and cluster_id are not foreign keys.
-- Pages are read newest first by id (the write order), hence (team_id, id DESC); (team_id, at DESC) serves
-- time ranges and (at) pruning.
CREATE TABLE audit_log (
    id         bigserial   PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    team_id    text,
    cluster_id text,
    actor      text        NOT NULL DEFAULT '', -- email or user name
    actor_id   text        NOT NULL DEFAULT '',
    action     text        NOT NULL CHECK (action <> ''),
    resource   text        NOT NULL DEFAULT '',
    result     text        NOT NULL DEFAULT '',
    source     text        NOT NULL DEFAULT '', -- client address
    user_agent text        NOT NULL DEFAULT '',
    detail     jsonb
);
CREATE INDEX audit_log_team_at ON audit_log (team_id, at DESC);
CREATE INDEX audit_log_team_id ON audit_log (team_id, id DESC);
CREATE INDEX audit_log_at ON audit_log (at);

-- Browser sessions: the cookie carries a random id; only its SHA-256 is stored. expires_at is the absolute
-- expiry; the idle expiry is measured from last_seen_at.
CREATE TABLE sessions (
    id_hash      bytea       PRIMARY KEY CHECK (octet_length(id_hash) = 32),
    user_id      uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    csrf_hash    bytea       NOT NULL CHECK (octet_length(csrf_hash) = 32),
    user_agent   text        NOT NULL DEFAULT '',
    source       text        NOT NULL DEFAULT ''
);
CREATE INDEX sessions_user ON sessions (user_id);

-- +goose Down
DROP TABLE sessions;
DROP TABLE audit_log;
DROP TABLE join_tokens;
DROP TABLE invitations;
DROP INDEX memberships_one_owner;
