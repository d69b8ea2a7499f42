// Package install serves what a machine needs to become a node: the install script and the agent binaries.
//
//	GET /install.sh                                    the script (text/x-shellscript), rendered with this
//	                                                   server's URL as the request reached it as its --server
//	GET /platform/v1/agent/binary?arch=<arch>          the agent binary for linux/<arch>
//	GET /platform/v1/agent/binary.sha256?arch=<arch>   its SHA-256, lower-case hex and a newline
//
// All three are public (a machine has no credential before it joins) and not audited; errors are RFC 9457
// problem+json. An arch is served from, in order: Config.Binaries[arch]; the server's own executable when the
// server runs on linux/<arch> (the agent is the same binary); Config.BinaryDir/wheelhouse-linux-<arch>. Anything
// else is 404 ("no agent binary for arch X on this server").
//
// Guarantees: a checksum is of the file the binary endpoint serves at that moment; it is computed once per file
// and recomputed when the file's size or modification time changes, so replacing a binary (an upgrade) is seen
// by the next request. A binary replaced between the two requests makes the script's check fail, never pass.
//
// The script (install.sh.tmpl) trusts nothing it downloads until it has checked it: the CA against the join
// token's pin, then the binary against the checksum fetched over the pinned connection. Its guarantees (idempotent
// reruns, nothing run from a truncated download, the token never on a command line nor in agent.env, only in
// /etc/wheelhouse/join-token until the node has joined: the agent deletes it once its credential is kept, and a
// rerun on a joined node writes none) are stated in its header and --help, and tested against a live server in
// script_test.go and jointoken_script_test.go.
package install
