// Package tunnel is both ends of the one outbound connection a node agent keeps to the server, through which
// the server reaches the agent's kubelet API although the node may sit behind NAT (docs/design/agent.md, "The
// tunnel").
//
// The agent dials a websocket to wss://<server>/clusters/<id>/agent/connect with its node credential as a
// bearer token (Serve). Over that websocket (binary messages) runs one yamux session in which the server opens
// streams and the agent accepts them: each stream is one HTTP/1.1 connection to the agent's Handler, so the
// server reaches a node as kube-apiserver reaches a kubelet, upgrades (SPDY, websocket) included.
//
// Guarantees:
//
//   - Registry holds at most one session per (cluster, node); a new connection for a key replaces the old one,
//     which is closed. A session leaves the Registry when it closes, for whatever reason.
//
//   - DialContext never waits for an agent: with no session for the key it fails at once with ErrNotConnected.
//
//   - Either side notices a silent peer within three keepalive intervals (websocket pings, 10 s by default;
//     yamux's own keepalive is off) and closes the session; the agent then reconnects.
//
//   - Serve reconnects until its context ends, waiting a jittered, exponentially growing delay (1 s doubling to
//     30 s) between attempts; the delay starts over once a connection has stayed up for a minute.
//
//   - The Registry refuses upgrade requests that carry an Origin header: nodes are not browsers, and a browser
//     must never be able to pose as one with ambient credentials.
//
//   - A tunnel lives no longer than its credential: the Check given to Accept runs every RecheckEvery (a
//     minute by default) and at every Recheck of its key (the server calls it when a node credential is
//     revoked on any replica), and a Check that says no closes the tunnel; a Check that cannot answer keeps it.
//     CloseCluster closes a deleted cluster's tunnels at once.
//
// Authentication is the caller's: the server authenticates the node before calling Registry.Accept, and the
// agent trusts whatever arrives through its own tunnel (its kubelet API listens on nothing else).
package tunnel
