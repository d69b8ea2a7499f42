// Package server is Wheelhouse's HTTP server: an Echo application with the operational endpoints every
// component behind it relies on. New builds it from a Config; Start serves until its context ends.
//
// # Endpoints
//
//   - /livez and /healthz: the process is up and serving. They never touch the database, so an orchestrator
//     does not restart the process during a database outage it cannot fix. 200 "ok".
//   - /readyz: the process can do useful work: the store answered CurrentRevision within
//     Config.ReadyTimeout. 200 "ok", else 503 with the list of checks ("[-]store failed: reason withheld").
//     As in Kubernetes, ?verbose lists the checks on success too ("[+]store ok"), ?exclude=NAME skips a check
//     and /readyz/NAME (/livez/NAME) runs one. Why a check failed is logged, never sent to the client.
//   - /version: the binary's version.Info as JSON (gitVersion, gitCommit, goVersion, platform, ...).
//   - /metrics: Prometheus exposition of Config.Registry: Go runtime and process collectors,
//     wheelhouse_build_info, wheelhouse_http_requests_total and wheelhouse_http_request_duration_seconds by
//     route pattern, method and code, and wheelhouse_store_revision / wheelhouse_store_up, queried from the
//     store at scrape time.
//
// # Requests
//
// Every request gets an ID: the client's X-Request-Id when it is at most 128 characters of [A-Za-z0-9._-],
// else a random one. It is sent back in X-Request-Id, is in the request context (RequestID) and is on every log
// line about the request. Each request is logged once, after it completes, with its route, status and duration:
// server errors at error level, probes and scrapes at debug level unless they fail, the rest at info level.
// Metric labels carry route patterns ("unmatched" when no route matched), never raw paths.
//
// Every request's client address is worked out once, before any handler runs (server/clientip): the
// connection's, or, when the connection comes from one of Config.TrustedProxies, the nearest address of its
// X-Forwarded-For that is not a trusted proxy. It is in the request context (clientip.Of) and is what
// echo.Context.RealIP returns; X-Real-IP is never read. Audit records and sign-in throttling use it.
//
// # Errors
//
// Errors are RFC 9457 problem+json bodies. An unknown route is a 404; a wrong method on a known route a 405 with
// Allow. A handler's error that is not an *echo.HTTPError below 500, and a handler's panic, become a 500
// whose body names only the status and the request ID: the error text and, for a panic, the stack are
// logged, never sent. No panic escapes a handler (except http.ErrAbortHandler, which net/http handles).
//
// # Shutdown
//
// When Start's context ends the server stops accepting connections and waits up to Config.ShutdownTimeout for
// open requests, then closes what remains and returns nil. Closing the store and anything else the handlers use
// is the caller's job, after Start has returned.
package server
