// Package tenancy keeps Wheelhouse's tenants and identities in PostgreSQL: teams, the clusters they own, users,
// their memberships (owner / admin / member / viewer) and API tokens. It authenticates bearer tokens, hashes
// passwords, and bootstraps a fresh installation. The schema is migrations/00002_tenancy.sql.
//
// # Identifiers
//
// Team and cluster ids are DNS labels (ValidID) and never change: a cluster id is the <id> of the cluster's
// Kubernetes URL prefix /clusters/<id>/ and the cluster column of every stored object. User and token ids are
// UUIDs. Emails are compared case-insensitively (NormalizeEmail).
//
// # API tokens
//
// A token minted here is "whp_" + 30 base62 characters from crypto/rand (about 178 bits) + a 6-character
// base62 CRC32 of everything before it, 40 characters in all. The checksum lets Authenticate reject a mistyped or
// truncated token without a database query, and lets secret scanners recognise leaked tokens. The plaintext is
// returned once, by CreateToken or Bootstrap; only its SHA-256 is stored. A token given to Bootstrap by the
// operator (WHEELHOUSE_BOOTSTRAP_TOKEN) may have any format of at least 16 characters and is accepted by its
// hash alone; one that starts with "whp_" must carry a valid checksum.
//
// # Authentication and caching
//
//   - Authenticate fails with ErrUnauthenticated for a malformed, unknown, revoked or expired token and for a
//     disabled user; it tells no caller which of these it was (the wrapped message does, for logs).
//   - A successful lookup is cached in the process for Config.CacheTTL (default 10 s, at most Config.CacheSize
//     entries), so most API requests do not touch the database. Consequently a revocation, a disabled user or a
//     changed membership made by another replica (or directly in the database) takes effect within CacheTTL.
//     RevokeToken on the same Store takes effect at once. A token's own expiry is checked on every call, cached
//     or not.
//   - last_used_at is written at most once a minute per token (across replicas), never on a cache hit.
//   - Principal.Admin means "owner or admin of the default team"; per-team authorization comes later.
//
// # Clusters
//
// Cluster is cached like tokens (positive results only, same TTL), for the per-request existence check of the
// Kubernetes API: a deleted cluster may still be served for up to CacheTTL. An id that is not a DNS label is
// ErrNotFound without a query. Clusters always reads the database.
//
// # Bootstrap
//
// Bootstrap runs at every server start. Under a transaction-scoped PostgreSQL advisory lock (so replicas that
// start together take turns and exactly one of them creates anything), it
//
//   - on a database without any team, creates team "default", cluster "default" in it, and user
//     "admin@localhost" as the team's owner. A database that has teams is left alone, so deleting the default
//     team or cluster later is not undone by a restart;
//   - with BootstrapConfig.Token, makes sure that token belongs to the admin (name "bootstrap"); without it,
//     mints a token only when the admin has never had one, and returns its plaintext once;
//   - with BootstrapConfig.Password, sets the admin's password when it differs; without it, generates one only
//     when the admin has none yet, and returns it once.
//
// A second Bootstrap therefore creates nothing and returns no secrets.
//
// # Passwords
//
// Passwords are hashed with argon2id (t=2, m=19 MiB, p=1, 16-byte salt, 32-byte key; the OWASP baseline) in
// the PHC string format "$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>" and compared in constant time.
// VerifyPassword accepts argon2id hashes with other (bounded) parameters and reports that they need rehashing;
// any other format is ErrInvalid.
//
// # Errors
//
// Errors wrap the sentinels below; compare with errors.Is. Driver errors never escape: a database that cannot be
// reached is ErrUnavailable, any other database failure ErrInternal, a closed Store ErrClosed.
//
// A Store is safe for concurrent use.
package tenancy
