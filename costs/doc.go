// Package costs prices API requests: a Table maps an HTTP request to the
// API method it calls and to what one call costs in each of the API's
// budgets, and reads the upstream's error responses. A Table is a
// quota.Pricer and a quota.Classifier, so it plugs into quota.NewTransport:
//
//	table, _ := costs.Builtin("youtube")
//	lim, _ := quota.New(store, table.API, table.Budgets)
//	client := &http.Client{Transport: quota.NewTransport(lim, table)}
//
// Builtin has the YouTube Data API v3 under Google's current rules
// ("youtube", since 2026-06-01) and under the dated single-pool rules
// before them ("youtube-2025-12": 2025-12-04 to 2026-05-31;
// "youtube-legacy": before 2025-12-04).
// Other tables load from JSON or YAML files (Load, Parse) or are built in Go
// (New). Methods, Charge and Estimate serve planning: what a run of so many
// calls would cost per budget.
//
// # File schema
//
// A table file holds one mapping. YAML:
//
//	api: youtube                   # the API's name (required)
//	source: https://...            # where the numbers come from (optional)
//	hosts: [www.googleapis.com, youtube.googleapis.com]   # the hosts priced (optional; see Hosts)
//	owner: project                 # budgets are kept per project (optional; see Owners)
//	refusal: google                # how quotactl proxy answers a refused call: problem (default), google, github
//	credential: key                # how the credential travels: bearer (default), key, x-goog-api-key
//	budgets:                       # the upstream's pools (at least one)
//	  - name: units                # letters, digits, '.', '_', '-'
//	    limit: 10000               # units per window, > 0
//	    window: daily:America/Los_Angeles   # or sliding:24h, or monthly:UTC
//	    unit: units                # what it counts: tokens, requests, points... (optional; default units)
//	  - {name: search, limit: 100, window: "daily:America/Los_Angeles"}
//	spend:                         # a budget counted in money (optional; see Spend)
//	  budget: {name: spend, limit_usd: 500, window: "monthly:America/Los_Angeles"}
//	  prices: openai               # a built-in price table, or a file beside this one
//	default: {units: 1}            # cost of a request matching no method (optional)
//	methods:                       # method name -> routes and cost
//	  videos.list:
//	    routes: [GET /youtube/v3/videos]
//	    cost: {units: 1}           # units per budget; > 0, <= the budget's limit
//	  search.list: {routes: [GET /youtube/v3/search], cost: {search: 1}}
//	  videos.insert: {routes: [POST /upload/youtube/v3/videos], cost: {units: 100}}
//	  captions.download:
//	    routes: ["GET /youtube/v3/captions/{id}"]
//	    cost: {units: 200}
//	    note: where the cost comes from   # optional
//	  comments.markAsSpam:         # deprecated upstream: Price refuses it
//	    routes: [POST /youtube/v3/comments/markAsSpam]
//	    cost: {units: 50}
//	    deprecated: "This method has been deprecated and is no longer supported."
//	  media.upload:                # a method that costs nothing must say so
//	    routes: ["PUT /upload/youtube/v3/{resource...}?upload_id"]
//	    free: true
//	responses:                     # how to read upstream errors (optional)
//	  - {status: 403, reasons: [quotaExceeded], exhaust: "*"}
//	  - {status: 429, limits: [per day], exhaust: "*"}   # a daily limit: spent
//	  - {status: 429, retry: true}                       # a per-minute throttle
//	  - status: 400                # one credential may not call a method for a while
//	    reasons: [uploadLimitExceeded]
//	    hold: [videos.insert]
//	    for: 24h
//	    source: https://developers.google.com/youtube/v3/docs/errors (read 2026-11-22)
//
// The same in JSON uses the same field names ({"api": "youtube", "budgets":
// [...], "methods": {"videos.list": {"routes": [...], "cost": {...}}}}).
// A method whose cost is known only from its body (an LLM call's tokens, a
// GraphQL query's cost) adds body: {format: openai-chat, input: [tokens],
// output: [tokens]} (see BodyPricing and Table.EstimateRequest; the
// built-in openai, anthropic and shopify-admin profiles use it).
// methods may also be a list of {name, routes, cost, free, note}: the form a
// Spec marshals to, so a table printed as JSON loads back. A single route may
// be written as a string. Unknown fields, duplicate keys and wrong types are
// errors; YAML anchors and merge keys are not supported.
//
// A route is "VERB /path" with an optional "?cond&cond": VERB is an HTTP
// method (or * for any); a path segment {name} matches one segment, a last
// segment {name...} matches the rest; a condition "param" requires the query
// parameter, "param=value" requires that value. Routes with conditions win
// over routes without, then literal paths over patterns, then more literal
// segments over fewer; two methods may not declare the same route.
//
// A route's VERB is one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS,
// CONNECT and TRACE.
//
// A response rule matches an upstream error response (status 400 to 599)
// by status; when it lists reasons, by the error reason in the body
// (Google's error.errors[].reason or error.details[].reason); when it lists
// limits, by the kind of quota limit the body names (the
// google.rpc.ErrorInfo detail's metadata.quota_limit, such as
// "SearchRequestsPerDayPerProject", or the error message: "per day"
// matches both, ignoring case, spaces, '_' and '-'); when it has headers,
// by response header values ({x-ratelimit-remaining: "0"}, exact); when it
// lists messages, by the error message (the body's top-level "message", or
// Google's error.message and error.errors[].message, containing one of them,
// ignoring case). It does one of three
// things: exhaust names the budgets the response says are spent, among
// those the request's method charges ("*": all of them), and the Transport
// marks them spent until their next reset (or, with reset_header, until the
// epoch seconds that response header gives, when sooner); retry: true marks the response
// as transient (retried with backoff, budgets left open); hold names
// methods the request's credential may not call for the duration for,
// which the Transport records in the store for that credential alone. The
// first matching rule wins. source says where the rule comes from. An
// explicit empty list (reasons: []) is an error: leave the field out.
//
// # Hosts
//
// hosts names the hosts whose requests the table prices: a host name or IP
// address ("[::1]" for IPv6), with ":port" only for a port that is not the
// default one. They compare ignoring case, a trailing dot and the default
// port of the request's scheme (443 for https, 80 for http): a table naming
// www.googleapis.com prices https://WWW.googleapis.com:443/..., not
// https://www.googleapis.com:8443/... nor http://evil.example/youtube/v3/....
// A request to a host the table does not name is no call of the API: Price
// returns an error wrapping quota.ErrForeignHost and charges nothing, and
// Classify reads nothing in its response. A quota.Transport sends such a
// request unmetered when it carries no credential it meters (a thumbnail on
// i.ytimg.com, an OAuth token refresh at oauth2.googleapis.com), and
// refuses it otherwise. The built-in YouTube tables name
// www.googleapis.com, youtube.googleapis.com and
// youtube.mtls.googleapis.com.
//
// A table without hosts prices requests to any host, as tables did before
// the field existed, so that existing files keep working; such a table
// charges a request to any host that has one of the API's paths, so declare
// the hosts. To price an API at another host (an emulator, a test server,
// a proxy), take a copy of its table for that host:
//
//	local, err := table.WithHosts("localhost:8080")
//
// # Owners
//
// An upstream may keep its budgets per account rather than per credential:
// Google bills YouTube quota per Cloud project, so every API key and OAuth
// token of one project shares the 10,000 units. owner: project says so
// (Table.Owner, quota.OwnerKind). A quota.Transport over such a table
// needs to know which owner each credential belongs to
// (quota.WithOwnerFunc, Credential.Owner, a limiter-wide owner, or one
// recorded in the store); given none, it meters every credential it sees as one owner named
// "unnamed-project" and logs that once, so that several keys can never
// spend more than one project's quota.
//
// # Sources
//
// The built-in profiles (profiles/*.yaml in the package source) say where
// every number and rule comes from: a method without a note is a row of
// Google's quota table (the table's source); every other cost has a note
// with its URL and the date it was read, or "not published" and the
// reasoning behind the price chosen; every response rule has a source.
//
// A bad file is a *SpecError naming the file, the line and the field, e.g.
//
//	costs: table.yaml:14: methods[videos.list].cost.unit: unknown budget "unit" (budgets: units, search)
package costs
