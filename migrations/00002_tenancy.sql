-- Tenancy: teams own clusters; users belong to teams through memberships; API tokens authenticate users.
-- See tenancy/doc.go. Never edit a released migration; add a new one.
--
-- Room for later steps: invitations, sessions, join tokens and audit get tables of their own that reference
-- these by id; users.password_hash is NULL for users who have not set a password (invited, token-only).

-- +goose Up
-- Team and cluster ids are DNS labels ("default", "acme-prod"): they appear in URLs (/clusters/<id>/...) and
-- in every object key of the store (objects.cluster), so they are immutable.
CREATE TABLE teams (
    id         text        PRIMARY KEY CHECK (id ~ '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'),
    name       text        NOT NULL CHECK (name <> ''),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE clusters (
    id           text        PRIMARY KEY CHECK (id ~ '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'),
    team_id      text        NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    name         text        NOT NULL CHECK (name <> ''),
    service_cidr cidr        NOT NULL DEFAULT '10.96.0.0/12',
    pod_cidr     cidr        NOT NULL DEFAULT '10.244.0.0/16',
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (team_id, name)
);

-- Emails are stored lower-cased (the application normalizes them), so a plain UNIQUE is case-insensitive.
CREATE TABLE users (
    id                  uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    email               text        NOT NULL UNIQUE CHECK (email <> '' AND email = lower(email)),
    password_hash       text,       -- PHC string ($argon2id$...); NULL: no password set
    disabled            boolean     NOT NULL DEFAULT false,
    created_at          timestamptz NOT NULL DEFAULT now(),
    password_changed_at timestamptz
);

CREATE TABLE memberships (
    team_id    text        NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    user_id    uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role       text        NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, user_id)
);
CREATE INDEX memberships_user ON memberships (user_id);

-- Only the SHA-256 of a token is stored; prefix is its first characters, shown to users to tell tokens apart.
CREATE TABLE api_tokens (
    id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id      uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         text        NOT NULL CHECK (name <> ''),
    prefix       text        NOT NULL,
    hash         bytea       NOT NULL UNIQUE CHECK (octet_length(hash) = 32),
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX api_tokens_user ON api_tokens (user_id);

-- +goose Down
DROP TABLE api_tokens;
DROP TABLE memberships;
DROP TABLE users;
DROP TABLE clusters;
DROP TABLE teams;
