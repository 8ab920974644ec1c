// Quotactl inspects and adjusts the client-side quota budgets that
// quotactl's limiter (github.com/quotactl/quotactl/quota) keeps in a store:
// what is left, what was spent, when it frees up. It needs no
// configuration: budget definitions and credential labels live in the store
// next to the usage, recorded by the services that use the limiter or by
// `quotactl budget set`.
//
// Usage:
//
//	quotactl [--store URL] [--json] COMMAND [ARGS] [FLAGS]
//
// Commands:
//
//	budget set API/BUDGET --limit N (--window DURATION | --daily ZONE | --monthly ZONE)
//	budget list
//	budget delete API/BUDGET
//	take API (--label L | --credential-env VAR | --credential-file F) [--label L] --cost N [--budget B] [--method M]
//	refund RESERVATION-ID
//	status [API] [--label L]
//	history API (--label L | --owner NAME) [--budget B] [--every 1h]
//	exhaust API --label L --budget B --until TIME
//	adjust API --label L --budget B --used N
//	reset API --label L [--budget B] --yes
//	list
//	costs show [API] [--table NAME|FILE]
//	costs estimate API METHOD=COUNT... [--table NAME|FILE] [--label L]
//	jobs [NAME] [--limit N]
//	version
//	completion bash|zsh|fish|powershell
//
// # The store
//
// --store URL, else $QUOTA_STORE, else sqlite:$XDG_STATE_HOME/quotactl/quota.db
// (or ~/.local/state/quotactl/quota.db); an empty --store, or a $QUOTA_STORE
// set but empty, is a usage error, not the default. Only budget set creates a store
// (and the default one's directory): commands that only read say that there
// is none yet, and the other commands that write fail with exit 2, creating
// nothing. The URL forms are quota/storeurl's: sqlite:PATH, sqlite:///ABS/PATH,
// memory:, redis://[USER:PASS@]HOST:PORT/DB, rediss://...,
// redis+sentinel://[:PASS@]HOST:PORT[,HOST:PORT]/MASTER[/DB] and
// redis+cluster://HOST:PORT[,HOST:PORT...], with ?prefix= for the Redis key
// prefix. Passwords are never printed.
//
// # Credentials
//
// A secret is never a flag value. --credential-env VAR reads it from an
// environment variable, --credential-file F from the first line of a file
// (trimmed); --label L alone names a credential the store already knows by
// that label (an unknown label is a usage error). Stores see fingerprints
// only. If the services sharing the store fingerprint with a key of their own
// (quota.WithFingerprintKey), set $QUOTA_FINGERPRINT_KEY to it.
//
// # Exit codes
//
//	0  success
//	1  error: the store is unreachable or unreadable (not a database), a
//	   reservation was not found or only partly refunded (a budget it
//	   charged is no longer defined), any other failure
//	2  usage: unknown command or flag, bad or missing value (duration, zone,
//	   cost <= 0, missing credential), unknown API, budget or label,
//	   malformed or empty store URL, no store at the URL (a command that writes),
//	   reset without --yes
//	3  a budget is spent: stderr names the budget and when it frees up
//	   (take; costs estimate when the run does not fit what is left)
//	4  the cost is larger than a budget's whole limit: it can never succeed
//
// Every error is one line on stderr, prefixed "quotactl: ". A refused or
// failed command records nothing.
//
// # Output
//
// On a terminal, tables are aligned under a header; when stdout is not a
// terminal, rows are tab-separated without one. $QUOTACTL_FORCE_TTY=1 (or 0)
// overrides the detection. Times are shown in the local zone, relative and
// absolute ("in 2h5m (2026-11-23 00:00:00 PST)").
//
// # JSON
//
// --json prints JSON instead, with these stable field names. Times are RFC
// 3339 in UTC; a field marked "omitted" is left out when there is no value.
//
//	budget set      {api, budget, limit, window}; window is "sliding:24h0m0s", "daily:America/Los_Angeles" or "monthly:Europe/Paris"
//	budget list     [{api, budget, limit, window}]
//	budget delete   {api, budget, deleted}
//	take            {id, api, credential, fingerprint, method, at,
//	                 usage: [{budget, cost, used, limit, remaining, reset (omitted)}]}
//	take (exit 3)   {exhausted: {api, budget, credential, used, limit, cost,
//	                 retry_at, retry_after_seconds, exhausted_until (omitted)}}
//	refund          {id, api, refunded}
//	refund (exit 1) {id, api, refunded, partial, refunded_units, not_refunded}: a budget
//	                 the reservation charged is no longer defined
//	status          [{api, owner (omitted), credentials: [{label, fingerprint}] (omitted),
//	                 credential, fingerprint, budget, window, source, used, limit,
//	                 remaining, reset (omitted), exhausted_until (omitted),
//	                 store_loss (omitted), percent, reset_seconds}]; percent is 100
//	                 while the budget is marked spent, reset_seconds whole seconds
//	                 rounded up; serve's /api/status prints the same bytes
//	history         [{api, owner, budget, credential, fingerprint, window, used, limit,
//	                 from, to, every_seconds, zone, buckets: [{start, end, units, calls,
//	                 methods (omitted)}], methods (omitted), jobs (omitted)}]
//	exhaust         {api, budget, credential, fingerprint, until}
//	adjust          {api, budget, credential, fingerprint, used, limit}
//	reset           [{api, budget, credential, fingerprint, used, limit}]
//	list            [{api, budgets: [{name, limit, window}], credentials: [{label, fingerprint}]}]
//	costs show      {table, api, source, hosts, owner, budgets: [{name, limit, window}],
//	                 methods: [{name, routes, cost, free, note, deprecated}]}
//	                 (without a table: [{table, api, source, owner, budgets, methods}])
//	costs estimate  {api, table, credential, fingerprint, counts, fits, runs_out_first,
//	                 budgets: [{budget, cost, left, limit, after, fits, unit, reset}]}
//	jobs            [{job, last, checkpoint, lease, waiting, next, plan, expected, units}]
//	jobs NAME       {job, last, checkpoint, lease, waiting, next, plan, expected, runs, units};
//	                 a run is the jobs package's Record:
//	                 {job, run, trigger, start, end, outcome, spent, charges,
//	                 unmetered, error, exhausted}; a checkpoint is {job, run, saved, cursor}
//	version         {version, commit, go, os, arch}
//
// See testdata/transcript.txt for a session.
package main
