// Package tenancy keeps Wheelhouse's tenants and identities in PostgreSQL: teams, the clusters they own, users,
// their memberships (owner / admin / member / viewer), API tokens, invitations, node join tokens and the audit
// log. It authenticates bearer tokens and join tokens, hashes passwords, and bootstraps a fresh installation.
// The schema is migrations/00002_tenancy.sql and migrations/00004_platform.sql.
//
// # Identifiers
//
// Team and cluster ids are DNS labels (ValidID) and never change: a cluster id is the <id> of the cluster's
// Kubernetes URL prefix /clusters/<id>/ and the cluster column of every stored object. User and token ids are
// UUIDs. Emails are compared case-insensitively (NormalizeEmail). An id that is not of its form is ErrNotFound
// without a query when it names something to read or change, ErrInvalid when it names something to create.
// Lists under a parent (Members, ClustersOf, Invitations, JoinTokens) are ErrNotFound for an unknown parent and
// an empty, non-nil slice for a parent without children. Times come from Config.Now.
//
// # Teams and members
//
// CreateTeam makes its caller the owner. A team has exactly one owner at all times: a partial unique index
// (memberships_one_owner) allows at most one, and the owner can be neither removed nor given another role
// (ErrConflict); ownership moves only by TransferOwnership, which demotes the owner to admin and promotes an
// existing, enabled member in one transaction. Membership changes of a team take a lock on its row (FOR NO KEY
// UPDATE), so concurrent transfers, role changes and removals apply one after another; the row lock does not
// block inserts that only reference the team. DeleteTeam cascades to memberships, invitations, clusters and
// their join tokens and returns the cluster ids, whose objects the caller removes from the object store.
// Team and cluster names are 1 to MaxNameLen bytes of UTF-8 without control characters, not blank.
//
// Changes that alter Principal.Admin (roles, removals, transfers, new members, deleted teams, disabled users)
// drop the affected cached principals of this Store at once (only relevant with Config.TokenCacheTTL set).
//
// # Users
//
// CreateUser takes an email that looks like local@domain (at most MaxEmailLen bytes) and an optional password
// (MinPasswordLen to 1024 bytes, argon2id-hashed). SetPassword and disabling a user (SetDisabled) delete all the
// user's browser sessions.
//
// SignIn counts every attempt before it checks the password (throttle.go, table login_throttle), in one upsert
// that increments and returns the counts under their rows' locks, so concurrent attempts are each evaluated
// against the true count: per account and source address, FreeFailures failures and then a back-off from
// BackoffBase doubling to MaxBackoff (a success or ThrottleWindow without attempts starts over), so an attacker
// cannot lock a user out from another address; per account and per address (an IPv6 /64),
// MaxAccountFailures and MaxAddressFailures per ThrottleWindow. A refused attempt is a *ThrottledError
// (ErrThrottled, RetryAfter says when to retry) and is not counted; a successful one is taken back.
//
// # Invitations
//
// An invitation token is "whi_" + 30 base62 characters from crypto/rand + a 6-character checksum, the format of
// API tokens with its own prefix; only its SHA-256 is stored and the plaintext is returned once. An invitation
// is pending until accepted, revoked or expired (DefaultInvitationTTL, at most MaxInvitationTTL). A team has at
// most one pending invitation per email, and none for an email that already belongs to a member (ErrConflict;
// checked under the team lock). InvitationByToken, AcceptInvitation and AcceptInvitationNewUser answer
// ErrNotFound for every token that is not pending, whatever the reason. Acceptance locks the invitation row
// (after a key-share lock on the team, the order DeleteTeam locks in), so a token is used once however many
// requests race for it; the accepting user must have the invitation's email. AcceptInvitationNewUser creates
// the user (with a required password) and the membership in one transaction.
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
//   - By default every call reads the database (one indexed lookup), so a revocation, an expiry, a disabled user
//     or a changed membership made by any replica applies to the next request. Config.TokenCacheTTL > 0 caches
//     successes in the process instead (at most Config.CacheSize entries): changes made elsewhere then take
//     effect within the TTL; RevokeToken on the same Store still applies at once, and a token's own expiry is
//     checked on every call, cached or not.
//   - AuthenticateCluster is never cached: it also returns the caller's role in the team owning a cluster, the
//     input of every Kubernetes API decision.
//   - last_used_at is written at most once a minute per token (across replicas), never on a cache hit.
//   - Principal.Admin means "owner or admin of the default team".
//
// # Clusters
//
// Cluster is cached like tokens (positive results only, same TTL), for the per-request existence check of the
// Kubernetes API: a deleted cluster may still be served for up to CacheTTL by other processes; DeleteCluster,
// DeleteTeam and CreateCluster drop the id from this Store's cache at once. An id that is not a DNS label is
// ErrNotFound without a query. Clusters, ClustersOf and the other calls always read the database.
//
// CreateCluster takes a service and a pod network, IPv4 prefixes in canonical form (no host bits), /8 to /28
// and /8 to /24, that must not overlap; empty ones are DefaultServiceCIDR and DefaultPodCIDR (the schema's
// defaults). Cluster ids are unique across teams, names within a team (ErrConflict). A deleted cluster's id is
// tombstoned (table cluster_tombstones, written by a trigger, so a team's cascade counts too) and never used
// again: CreateCluster refuses it with ErrConflict, and Bootstrap does not recreate a deleted default cluster.
//
// # Access events
//
// Triggers log every change that takes access away in table access_events, in the changing transaction, and
// NOTIFY channel wheelhouse_access: AccessCluster (a cluster deleted, also by its team's deletion), AccessNode (a
// node credential revoked or deleted), AccessUser (an API token revoked, its expiry changed or deleted, a
// membership removed or its role changed, a user disabled or deleted). FollowAccessEvents delivers, in log
// order, every event committed after it started, on a LISTEN connection of its own, reading the log after each
// notification, each reconnect and every AccessFollowConfig.Poll: a lost notification or a dropped connection
// delays an event, never loses it (within AccessFollowConfig.Retention, after which followers prune the log).
// Every server replica follows it to close tunnels, end long-running requests and drop per-cluster state
// (docs/design/revocation.md).
//
// # Join tokens
//
// A join token lets nodes join one cluster: "K10" + the lower-case hex SHA-256 of the cluster CA certificate
// (DER; may be empty: no pin) + "::" + a 6-character public id ([a-z0-9]) + "." + a 32-character base62 secret
// from crypto/rand (about 190 bits), as k3s's secure tokens, so a node can check the server's CA before it
// sends the secret. Only the secret's SHA-256 is stored; the token is returned once. UseJoinToken checks and
// counts a use in one UPDATE (secret hash, not revoked, not expired, uses below max_uses), so concurrent uses
// never exceed MaxUses; a token that fails any check is ErrUnauthenticated (the wrapped message says which,
// for logs), a database failure ErrUnavailable or ErrInternal. The CA hash is not checked by the server.
// JoinNode spends the use and checks the node name in one transaction, the token first: a bad token is
// ErrUnauthenticated whatever the name (nothing is learnt of the cluster's nodes without a valid token), and
// a taken name (ErrConflict) rolls the use back.
//
// # Audit
//
// Audit writes a batch of events with one COPY. Events are checked one by one and a bad event never costs
// another: an event without an Action, dated outside the years 1-9999, or with a Detail that is not JSON or
// above 64 KiB is left out and named in an ErrInvalid error while the others are written. AuditWriter (the
// background writer of both APIs) logs and drops such an event alone, and writes a batch the database refuses
// again one event at a time, so that only the event it cannot store is lost. Text is made storable rather than refused (invalid UTF-8
// replaced, NUL dropped, fields cut to 1024 bytes). Records have no foreign keys, so they outlive their teams
// and clusters. AuditLog reads one team's records (TeamID required) newest first by id, the write order, with
// optional filters (cluster, actor by name or id, action, time range); Limit defaults to DefaultAuditLimit and
// is capped at MaxAuditLimit; to page, pass the last ID of a page as Before. PruneAudit deletes records older
// than a time in batches of 10,000.
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
