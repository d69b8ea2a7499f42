// Package pgserver runs a private PostgreSQL server from the machine's own PostgreSQL binaries. It is the
// embedded default of `wheelhouse server` (no --database-url) and the throwaway server of `make test`.
//
// Guarantees:
//   - FindBinDir looks in PATH, then /usr/lib/postgresql/<version>/bin (newest version first), and when nothing is
//     found returns ErrNoBinaries, whose message names the package to install.
//   - Start runs initdb on first use of a data directory, starts `postgres` as a child process and returns once
//     it accepts connections. Each later Start reuses the data directory.
//   - PostgreSQL refuses to run as root: when the caller is root the server runs as an unprivileged user (the
//     `postgres` system user where it exists, else `nobody`), and the data directory is handed to that user.
//   - By default the server listens only on a unix socket in a private (0700) directory, with trust
//     authentication: only the owner (and root) can reach it. Config.TCP adds a loopback TCP port for tools that
//     need one (tests, the perf harness).
//   - Stop performs a fast shutdown (SIGINT) and waits for the process; if the parent dies first the kernel sends
//     the server SIGQUIT (Pdeathsig), so no postmaster outlives its owner.
package pgserver
