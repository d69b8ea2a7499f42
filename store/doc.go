// Package store is Wheelhouse's etcd-like object store on PostgreSQL: it keeps every Kubernetes object of every
// tenant, gives each change a revision (the object's metadata.resourceVersion) and lets readers watch changes from
// any revision still in history. The design and its reasons are in docs/design/store.md.
//
// # Keys and values
//
// An object is keyed by (cluster, resource, namespace, name); namespace is empty for cluster-scoped resources.
// The value is opaque bytes (the API stores JSON). The store never looks inside it.
//
// # Revisions
//
// There is one revision counter for the whole database, like one etcd cluster. Every successful write gets its
// own revision; revisions are positive, strictly increasing IN COMMIT ORDER across every process sharing the
// database, and never reused. They are not contiguous: a failed write inside a batch leaves a hole. Any reader
// sees a prefix of the revision log: if it sees revision r it sees every write below r.
//
// # Operations and errors
//
//   - Create fails with ErrExists if the key exists.
//   - Get fails with ErrNotFound.
//   - Update and Delete compare-and-swap on the expected revision (0 means "any"): ErrNotFound when the key is
//     absent, ErrConflict when its revision differs. On ErrConflict nothing was written; read and retry.
//   - List returns one cluster+resource (optionally one namespace) in key order, with the revision it was read at.
//     The items and the revision come from one snapshot. With Limit, it returns a continue token; every later page
//     is read at the first page's revision, so the pages join into one consistent list. A bad token is
//     ErrBadContinue; a revision below the compaction revision is ErrCompacted; one above the current revision is
//     ErrFutureRevision.
//   - Calls fail with ErrUnavailable, within the caller's context deadline, when PostgreSQL cannot be reached or
//     does not answer; the store reconnects by itself. Nothing was written.
//   - A write whose COMMIT was sent but not acknowledged is first resolved by the store itself
//     (pg_xact_status). When even that is impossible the error is an *AmbiguousError (errors.Is ErrAmbiguous):
//     the write may or may not have happened; ResolveCommit answers later. It is never reported as success or as
//     a conflict.
//   - Keys: every part is valid UTF-8 without NUL, at most MaxKeyPart bytes (ValidKeyPart); any other key, or
//     a List namespace that breaks the rule, is ErrInvalid, checked before a query (PostgreSQL's own refusal of
//     such text is translated to ErrInvalid too).
//   - Database driver errors never leak out: every error is one of the sentinels above, ErrInvalid, a context
//     error, or ErrInternal, wrapped with the key involved.
//
// # Watch
//
// Watch delivers ADDED / MODIFIED / DELETED events with revision > WatchOptions.Revision, for one cluster or all,
// one resource or all, in revision order, each exactly once (ordered, unique, reliable). Each event is one
// write (atomic). A DELETED event carries the object's last state. A watch can resume from the revision of the
// last event it saw (resumable) as long as that revision is not compacted; with Progress it also receives
// periodic BOOKMARK events carrying a revision up to which it has seen everything (bookmarkable). These hold
// across several processes sharing the database, under concurrent writers, across dropped LISTEN connections
// (LISTEN/NOTIFY only wakes readers; the history table is the truth) and database restarts.
//
// A watcher that does not keep up is closed with ErrWatcherSlow after its buffer fills; it never blocks other
// watchers or writers and never grows memory without bound. Its client resumes from its last revision.
//
// # Compaction
//
// Compact(r) discards history that no read at revision >= r needs. Reads and watches from below the compaction
// revision fail with ErrCompacted (the API's 410 Gone); a watch from exactly the compaction revision still
// receives every later event, deletes included. With Config.Retention, a background loop compacts to the
// revision that was current Retention ago, so history stays bounded under constant churn.
package store
