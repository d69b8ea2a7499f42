-- Agent tunnels: which server replica holds the tunnel of each node agent, and the URL other replicas reach it
-- at, so a request for a node's kubelet that lands on another replica is forwarded there. Rows are ephemeral
-- (written on connect, deleted on disconnect by the replica that wrote them; a newer connection overwrites), so
-- there is no foreign key to clusters: a deleted cluster's agents lose their credentials and disconnect.

-- +goose Up
CREATE TABLE agent_tunnels (
    cluster_id   text        NOT NULL,
    node_name    text        NOT NULL,
    replica      text        NOT NULL,
    peer_url     text        NOT NULL,
    connected_at timestamptz NOT NULL,
    PRIMARY KEY (cluster_id, node_name)
);

-- +goose Down
DROP TABLE agent_tunnels;
