-- Keys order by their bytes, as etcd's do: list pages, continue tokens and the API's watch cache (which orders
-- keys in memory) must agree on one order whatever the database's default collation is. On a database created
-- with --locale=C (the self-managed one) this changes nothing but the declared collation.

-- +goose Up
ALTER TABLE objects
    ALTER COLUMN cluster   TYPE text COLLATE "C",
    ALTER COLUMN resource  TYPE text COLLATE "C",
    ALTER COLUMN namespace TYPE text COLLATE "C",
    ALTER COLUMN name      TYPE text COLLATE "C";
ALTER TABLE history
    ALTER COLUMN cluster   TYPE text COLLATE "C",
    ALTER COLUMN resource  TYPE text COLLATE "C",
    ALTER COLUMN namespace TYPE text COLLATE "C",
    ALTER COLUMN name      TYPE text COLLATE "C";

-- +goose Down
ALTER TABLE objects
    ALTER COLUMN cluster   TYPE text COLLATE "default",
    ALTER COLUMN resource  TYPE text COLLATE "default",
    ALTER COLUMN namespace TYPE text COLLATE "default",
    ALTER COLUMN name      TYPE text COLLATE "default";
ALTER TABLE history
    ALTER COLUMN cluster   TYPE text COLLATE "default",
    ALTER COLUMN resource  TYPE text COLLATE "default",
    ALTER COLUMN namespace TYPE text COLLATE "default",
    ALTER COLUMN name      TYPE text COLLATE "default";
