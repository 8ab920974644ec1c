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
// ("youtube") and under the older single-pool rules ("youtube-legacy").
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
//	budgets:                       # the upstream's pools (at least one)
//	  - name: units                # letters, digits, '.', '_', '-'
//	    limit: 10000               # units per window, > 0
//	    window: daily:America/Los_Angeles   # or sliding:24h
//	  - {name: search, limit: 100, window: "daily:America/Los_Angeles"}
//	default: {units: 1}            # cost of a request matching no method (optional)
//	methods:                       # method name -> routes and cost
//	  videos.list:
//	    routes: [GET /youtube/v3/videos]
//	    cost: {units: 1}           # units per budget; > 0, <= the budget's limit
//	  search.list: {routes: [GET /youtube/v3/search], cost: {search: 1}}
//	  captions.download:
//	    routes: ["GET /youtube/v3/captions/{id}"]
//	    cost: {units: 200}
//	    note: where the cost comes from   # optional
//	  media.upload:                # a method that costs nothing must say so
//	    routes: ["PUT /upload/youtube/v3/{resource...}?upload_id"]
//	    free: true
//	responses:                     # how to read upstream errors (optional)
//	  - {status: 403, reasons: [quotaExceeded], exhaust: "*"}
//	  - {status: 429, reasons: [rateLimitExceeded], exhaust: [search]}
//	  - {status: 403, reasons: [userRateLimitExceeded], retry: true}
//
// The same in JSON uses the same field names ({"api": "youtube", "budgets":
// [...], "methods": {"videos.list": {"routes": [...], "cost": {...}}}}).
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
// A response rule matches an upstream response by status and, when it lists
// reasons, by the error reason in the body (Google's error.errors[].reason
// or error.details[].reason). exhaust names the budgets the response says are
// spent, among those the request's method charges ("*": all of them); the
// Transport marks them spent until their next reset. retry: true marks the
// response as transient. The first matching rule wins.
//
// A bad file is a *SpecError naming the file, the line and the field, e.g.
//
//	costs: table.yaml:14: methods[videos.list].cost.unit: unknown budget "unit" (budgets: units, search)
package costs
