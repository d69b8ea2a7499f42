-- Revocation across replicas (docs/design/revocation.md):
--   cluster_tombstones: the id of every deleted cluster, so no id is ever taken by a second cluster (state left
--   under an id in some replica can then never reach another tenant);
--   access_events: a log of changes that take access away, written by triggers in the changing transaction and
--   announced on channel wheelhouse_access, which every replica follows to close tunnels, end long-running
--   requests and drop per-cluster state.

-- +goose Up
CREATE TABLE cluster_tombstones (
    id         text        PRIMARY KEY,
    team_id    text        NOT NULL,
    deleted_at timestamptz NOT NULL DEFAULT now()
);

-- kind: 'cluster' (cluster = the deleted cluster), 'node' (cluster, subject = node name: a credential revoked or
-- deleted), 'user' (subject = user id: a token revoked or deleted, a membership removed or changed, a user
-- disabled or deleted).
CREATE TABLE access_events (
    id      bigserial   PRIMARY KEY,
    kind    text        NOT NULL CHECK (kind IN ('cluster', 'node', 'user')),
    cluster text        NOT NULL DEFAULT '',
    subject text        NOT NULL DEFAULT '',
    at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX access_events_at ON access_events (at);

-- +goose StatementBegin
CREATE FUNCTION wh_access_event(k text, c text, s text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO access_events (kind, cluster, subject) VALUES (k, c, s);
    PERFORM pg_notify('wheelhouse_access', '');
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION wh_cluster_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO cluster_tombstones (id, team_id) VALUES (OLD.id, OLD.team_id) ON CONFLICT (id) DO NOTHING;
    PERFORM wh_access_event('cluster', OLD.id, '');
    RETURN OLD;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER clusters_deleted AFTER DELETE ON clusters FOR EACH ROW EXECUTE FUNCTION wh_cluster_deleted();

-- +goose StatementBegin
CREATE FUNCTION wh_cluster_tombstoned() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM cluster_tombstones WHERE id = NEW.id) THEN
        RAISE EXCEPTION 'cluster id % was used by a deleted cluster', NEW.id
            USING ERRCODE = 'unique_violation', CONSTRAINT = 'cluster_tombstones_pkey';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER clusters_tombstoned BEFORE INSERT ON clusters FOR EACH ROW EXECUTE FUNCTION wh_cluster_tombstoned();

-- +goose StatementBegin
CREATE FUNCTION wh_node_credential_revoked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF OLD.revoked_at IS NULL THEN
            PERFORM wh_access_event('node', OLD.cluster_id, OLD.node_name);
        END IF;
        RETURN OLD;
    END IF;
    IF OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL THEN
        PERFORM wh_access_event('node', NEW.cluster_id, NEW.node_name);
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER node_credentials_revoked AFTER UPDATE OF revoked_at OR DELETE ON node_credentials
    FOR EACH ROW EXECUTE FUNCTION wh_node_credential_revoked();

-- +goose StatementBegin
CREATE FUNCTION wh_api_token_revoked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM wh_access_event('user', '', OLD.user_id::text);
        RETURN OLD;
    END IF;
    IF NEW.revoked_at IS DISTINCT FROM OLD.revoked_at OR NEW.expires_at IS DISTINCT FROM OLD.expires_at THEN
        PERFORM wh_access_event('user', '', NEW.user_id::text);
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER api_tokens_revoked AFTER UPDATE OF revoked_at, expires_at OR DELETE ON api_tokens
    FOR EACH ROW EXECUTE FUNCTION wh_api_token_revoked();

-- +goose StatementBegin
CREATE FUNCTION wh_membership_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM wh_access_event('user', '', OLD.user_id::text);
        RETURN OLD;
    END IF;
    IF NEW.role IS DISTINCT FROM OLD.role THEN
        PERFORM wh_access_event('user', '', NEW.user_id::text);
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER memberships_changed AFTER UPDATE OF role OR DELETE ON memberships
    FOR EACH ROW EXECUTE FUNCTION wh_membership_changed();

-- +goose StatementBegin
CREATE FUNCTION wh_user_access_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM wh_access_event('user', '', OLD.id::text);
        RETURN OLD;
    END IF;
    IF NEW.disabled AND NOT OLD.disabled THEN
        PERFORM wh_access_event('user', '', NEW.id::text);
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER users_access_changed AFTER UPDATE OF disabled OR DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION wh_user_access_changed();

-- +goose Down
DROP TRIGGER users_access_changed ON users;
DROP TRIGGER memberships_changed ON memberships;
DROP TRIGGER api_tokens_revoked ON api_tokens;
DROP TRIGGER node_credentials_revoked ON node_credentials;
DROP TRIGGER clusters_tombstoned ON clusters;
DROP TRIGGER clusters_deleted ON clusters;
DROP FUNCTION wh_user_access_changed();
DROP FUNCTION wh_membership_changed();
DROP FUNCTION wh_api_token_revoked();
DROP FUNCTION wh_node_credential_revoked();
DROP FUNCTION wh_cluster_tombstoned();
DROP FUNCTION wh_cluster_deleted();
DROP FUNCTION wh_access_event(text, text, text);
DROP TABLE access_events;
DROP TABLE cluster_tombstones;
