package costs

import (
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// Spec is the definition of a cost table, as written in a JSON or YAML file
// (see the package documentation for the file schema) or built in Go. New
// checks it and builds a Table.
type Spec struct {
	// API names the upstream API the budgets belong to, e.g. "youtube".
	API string `json:"api"`
	// Source says where the costs come from: a URL and the date it was read.
	Source string `json:"source,omitempty"`
	// Hosts are the hosts whose requests the table prices, e.g.
	// "www.googleapis.com": a host name or IP address, with a port only
	// when it is not the default one. A request to another host is no call
	// of the API: Price returns an error wrapping quota.ErrForeignHost and
	// charges none of the API's budgets (a quota.Transport sends it
	// unmetered if it carries no credential, and refuses it otherwise).
	// Hosts compare ignoring case, a trailing dot and the default port of
	// the request's scheme (443 for https, 80 for http). Empty: the table
	// prices requests to any host, as tables did before hosts existed;
	// declare them so that a request to another host is never charged to
	// the API. Table.WithHosts prices the API at other hosts (an
	// emulator, a proxy).
	Hosts []string `json:"hosts,omitempty"`
	// Owner, when set, names the kind of account the upstream keeps the
	// budgets per, e.g. "project": Google bills YouTube quota per Cloud
	// project, so every key and token of one project shares its budgets. A
	// Transport over such a table meters every credential as one owner
	// unless told which owner each belongs to (see quota.WithOwnerFunc).
	// Empty: each credential is its own owner. A name like an API name.
	Owner string `json:"owner,omitempty"`
	// Refusal, when set, names the upstream's own error shape, in which a
	// metering proxy (quotactl proxy) answers a call it refuses, so the
	// client library's own handling applies: "google" (Google APIs' 403
	// quotaExceeded), "github" (GitHub's 403 with x-ratelimit-remaining: 0)
	// or "problem" (429 and an RFC 9457 problem document). Empty means
	// "problem".
	Refusal string `json:"refusal,omitempty"`
	// Credential, when set, says how the upstream expects a credential:
	// "key" (the "key" query parameter, as Google API keys travel),
	// "x-goog-api-key" (that header) or "bearer" (an Authorization: Bearer
	// header). A metering proxy holding the credential adds it this way.
	// Empty means "bearer".
	Credential string `json:"credential,omitempty"`
	// Budgets are the upstream's pools, e.g. 10,000 units a day.
	Budgets []quota.Budget `json:"budgets"`
	// Default, when not empty, is the cost of a request that matches no
	// method. Without it such a request is an error (ErrUnknownMethod).
	Default map[string]int64 `json:"default,omitempty"`
	// Methods price the API's methods.
	Methods []Method `json:"methods"`
	// Responses classify upstream error responses (see Rule).
	Responses []Rule `json:"responses,omitempty"`
	// Reports say how to read, from every response, where the account
	// stands (see ReportSpec and quota.Reporter).
	Reports []ReportSpec `json:"reports,omitempty"`
	// Spend, when set, adds a budget counted in money to Budgets, priced
	// from a price table (see Spend and Table.WithSpend).
	Spend *Spend `json:"spend,omitempty"`
}

// Method is one API method: its name, the routes that call it and what one
// call costs.
type Method struct {
	// Name is the method's name, e.g. "videos.list".
	Name string `json:"name"`
	// Routes are the route patterns that call the method, e.g.
	// "GET /youtube/v3/videos" (see the package documentation).
	Routes []string `json:"routes"`
	// Cost is the units one call takes from each budget, e.g. {"units": 1}.
	// It is empty only when Free is set.
	Cost map[string]int64 `json:"cost,omitempty"`
	// Free marks a method that costs nothing, such as the later requests of
	// a resumable upload whose first request was charged. A Transport sends
	// it without taking anything.
	Free bool `json:"free,omitempty"`
	// Note says where the cost comes from when it is not the upstream's
	// published table.
	Note string `json:"note,omitempty"`
	// Deprecated, when set, is the upstream's notice that the method is no
	// longer supported. Price refuses such a request (ErrDeprecated), so it
	// is never sent to spend units on a call the upstream no longer serves;
	// Charge and Estimate still price it for planning.
	Deprecated string `json:"deprecated,omitempty"`
	// Body, when set, prices the method by reading the request's body and
	// settles it from the response's usage (see BodyPricing and
	// Table.EstimateRequest).
	Body *BodyPricing `json:"body,omitempty"`
}

// Charge returns the method's cost as a quota.Charge (no units when Free).
func (m Method) Charge() quota.Charge {
	return quota.Charge{Method: m.Name, Units: maps.Clone(m.Cost)}
}

// Rule classifies upstream error responses: a response with Status, one of
// Reasons (any reason when Reasons is empty) and, when Limits is set, a
// quota limit of one of those kinds, means one of three things:
//
//   - Exhaust: budgets of the request's owner are spent until their next
//     reset;
//   - Retry: the failure is transient (a per-minute throttle, a backend
//     hiccup) and worth a retry with backoff;
//   - Hold: the credential that sent the request may not call the Hold
//     methods for For (YouTube's per-channel upload cap), whatever the
//     owner's budgets say; the owner's budgets are untouched.
//
// Exactly one of Exhaust, Retry and Hold is set. The first matching rule
// wins.
type Rule struct {
	// Status is the HTTP status, 400 to 599: the Transport reads only error
	// responses.
	Status int `json:"status"`
	// Reasons are the upstream's error reasons, e.g. "quotaExceeded" (for
	// Google APIs, error.errors[].reason or error.details[].reason).
	Reasons []string `json:"reasons,omitempty"`
	// Limits narrows the rule to responses naming a quota limit of one of
	// these kinds, e.g. "per day": matched, ignoring case, spaces, '_' and
	// '-', within the google.rpc.ErrorInfo detail's metadata.quota_limit
	// ("DefaultRequestsPerDayPerProject") or the error message ("limit
	// 'Queries per day'"). It tells a daily limit from a per-minute one
	// answered with the same status and reason.
	Limits []string `json:"limits,omitempty"`
	// Exhaust names the budgets the response says are spent, among those the
	// request's method charges; "*" means every budget the method charges.
	// A budget the method does not charge is left alone.
	Exhaust []string `json:"exhaust,omitempty"`
	// Retry marks the response as transient.
	Retry bool `json:"retry,omitempty"`
	// Hold names methods the request's credential may not call for For; the
	// rule matches only requests to one of them. For is required with Hold
	// and forbidden without it.
	Hold []string      `json:"hold,omitempty"`
	For  time.Duration `json:"for,omitempty"`
	// Headers narrows the rule to responses carrying each of these header
	// fields with exactly this value (surrounding spaces ignored), e.g.
	// {"x-ratelimit-remaining": "0"}: GitHub says a primary limit is spent
	// with its headers, not its body.
	Headers map[string]string `json:"headers,omitempty"`
	// Messages narrows the rule to responses whose error message contains
	// one of these, ignoring case: the body's top-level "message" (GitHub
	// and most JSON APIs) or Google's error.message and
	// error.errors[].message, e.g. "secondary rate limit".
	Messages []string `json:"messages,omitempty"`
	// ResetHeader, with Exhaust, names a response header holding when the
	// upstream's window resets, in UTC epoch seconds (GitHub's
	// x-ratelimit-reset): the budgets are spent until then rather than until
	// their own window's next reset, when that is sooner
	// (quota.Verdict.Until). A missing or unreadable value is ignored.
	ResetHeader string `json:"reset_header,omitempty"`
	// Source says where the rule comes from: a URL and the date it was read,
	// or "not published" and the reasoning.
	Source string `json:"source,omitempty"`
}

// Table prices HTTP requests to one API: it resolves a request's method
// name from its HTTP method and path and returns the quota.Charge. It
// implements quota.Pricer and quota.Classifier, so it plugs straight into
// quota.NewTransport, and carries the API's name and budgets, so
//
//	lim, err := quota.New(store, table.API, table.Budgets)
//
// builds the matching Limiter. A Table is immutable and safe for concurrent
// use; treat API and Budgets as read-only.
type Table struct {
	// API is the API's name, e.g. "youtube".
	API string
	// Budgets are the API's budgets, in the order the table declares them.
	Budgets []quota.Budget
	// Source says where the costs come from.
	Source string
	// Owner is the kind of account the budgets are kept per (Spec.Owner),
	// e.g. "project"; empty when each credential is its own owner.
	Owner string

	spec    Spec
	methods map[string]*Method
	charges map[*Method]quota.Charge
	router  *router
	def     quota.Charge
	budgets map[string]quota.Budget
	hosts   []host  // nil: any host
	spend   string  // the spend budget (WithSpend); "" for none
	prices  *Prices // prices of the spend budget
}

var (
	_ quota.Pricer     = (*Table)(nil)
	_ quota.Classifier = (*Table)(nil)
	_ quota.OwnerKind  = (*Table)(nil)
	_ quota.Holder     = (*Table)(nil)
)

// OwnerKind implements quota.OwnerKind: the kind of account the table's
// budgets are kept per (Owner), or "" when each credential is its own.
func (t *Table) OwnerKind() string { return t.Owner }

// HoldMethods implements quota.Holder: the methods a response rule can hold
// for one credential (Rule.Hold), sorted. A Transport checks the store for
// a hold only before requests to one of them.
func (t *Table) HoldMethods() []string {
	var out []string
	for _, r := range t.spec.Responses {
		for _, b := range r.Hold {
			if !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	slices.Sort(out)
	return out
}

// New checks spec and builds its Table. A problem is a *SpecError naming the
// field: an invalid API, host or budget, a method without routes or cost, a cost
// naming an unknown budget or larger than the budget's limit (it could never
// be paid), a bad or duplicate route, a bad response rule.
func New(spec Spec) (*Table, error) { return newTable(spec, "") }

// newTable is New, with a Spend's price file relative to dir ("": the
// working directory).
func newTable(spec Spec, dir string) (*Table, error) {
	if err := backend.CheckName("api", spec.API); err != nil {
		return nil, specErrorf("api", "%s", trimInvalid(err))
	}
	if spec.Owner != "" {
		if err := backend.CheckName("owner", spec.Owner); err != nil {
			return nil, specErrorf("owner", "%s", trimInvalid(err))
		}
	}
	t := &Table{
		API:     spec.API,
		Source:  spec.Source,
		Owner:   spec.Owner,
		methods: make(map[string]*Method, len(spec.Methods)),
		charges: make(map[*Method]quota.Charge, len(spec.Methods)),
		budgets: make(map[string]quota.Budget, len(spec.Budgets)),
	}
	hosts, err := t.setBudgetsAndHosts(spec)
	if err != nil {
		return nil, err
	}
	if len(spec.Default) > 0 {
		if err := t.checkCost("default", spec.Default); err != nil {
			return nil, err
		}
		t.def = quota.Charge{Units: maps.Clone(spec.Default)}
	}
	if len(spec.Methods) == 0 {
		return nil, specErrorf("methods", "no methods")
	}
	routes, ms, err := t.setMethods(spec.Methods)
	if err != nil {
		return nil, err
	}
	for i, r := range spec.Responses {
		if err := t.checkRule(fmt.Sprintf("responses[%d]", i), r); err != nil {
			return nil, err
		}
	}
	if err := t.checkReports(spec.Reports); err != nil {
		return nil, err
	}
	if err := checkEnum("refusal", spec.Refusal, Refusals); err != nil {
		return nil, err
	}
	if err := checkEnum("credential", spec.Credential, CredentialForms); err != nil {
		return nil, err
	}
	t.router = newRouter(routes)
	t.spec = Spec{
		API: spec.API, Source: spec.Source, Hosts: hosts, Owner: spec.Owner, Refusal: spec.Refusal, Credential: spec.Credential,
		Budgets: slices.Clone(spec.Budgets),
		Default: maps.Clone(spec.Default), Methods: ms, Responses: cloneRules(spec.Responses),
		Reports: cloneReports(spec.Reports),
	}
	sort.Slice(t.spec.Methods, func(i, j int) bool { return t.spec.Methods[i].Name < t.spec.Methods[j].Name })
	if spec.Spend != nil {
		return t.declareSpend(*spec.Spend, dir)
	}
	return t, nil
}

// setBudgetsAndHosts checks and sets the table's budgets and hosts, and
// returns the hosts as the spec writes them.
func (t *Table) setBudgetsAndHosts(spec Spec) ([]string, error) {
	if len(spec.Budgets) == 0 {
		return nil, specErrorf("budgets", "no budgets: declare at least one, e.g. {name: units, limit: 10000, window: daily:America/Los_Angeles} or {name: tokens, limit: 1000000, window: monthly:UTC}")
	}
	for i, b := range spec.Budgets {
		field := fmt.Sprintf("budgets[%d]", i)
		if err := backend.ValidateBudgets([]quota.Budget{b}); err != nil {
			return nil, specErrorf(field, "%s", trimInvalid(err))
		}
		if _, dup := t.budgets[b.Name]; dup {
			return nil, specErrorf(field+".name", "duplicate budget %q", b.Name)
		}
		t.budgets[b.Name] = b
	}
	t.Budgets = slices.Clone(spec.Budgets)
	var hosts []string
	for i, s := range spec.Hosts {
		h, msg := parseHost(s)
		if msg != "" {
			return nil, specErrorf(fmt.Sprintf("hosts[%d]", i), "%s", msg)
		}
		if j := slices.Index(t.hosts, h); j >= 0 {
			return nil, specErrorf(fmt.Sprintf("hosts[%d]", i), "duplicate host %q (hosts[%d] is %q)", s, j, spec.Hosts[j])
		}
		t.hosts = append(t.hosts, h)
		hosts = append(hosts, h.String())
	}
	return hosts, nil
}

// setMethods checks and sets the table's methods, and returns their routes
// and the methods as the spec writes them.
func (t *Table) setMethods(methods []Method) ([]*route, []Method, error) {
	if len(methods) == 0 {
		return nil, nil, specErrorf("methods", "no methods")
	}
	var routes []*route
	shapes := map[string]string{} // route shape -> method that declared it
	ms := make([]Method, 0, len(methods))
	for i, m := range methods {
		field := "methods[" + m.Name + "]"
		if err := checkMethodName(m.Name); err != "" {
			return nil, nil, specErrorf(fmt.Sprintf("methods[%d].name", i), "%s", err)
		}
		if _, dup := t.methods[m.Name]; dup {
			return nil, nil, specErrorf(field, "duplicate method %q", m.Name)
		}
		if err := t.checkMethodCost(field, m); err != nil {
			return nil, nil, err
		}
		if err := t.checkBody(field+".body", m); err != nil {
			return nil, nil, err
		}
		if len(m.Routes) == 0 {
			return nil, nil, specErrorf(field+".routes", "no routes: give at least one, e.g. \"GET /youtube/v3/videos\"")
		}
		mp := &Method{Name: m.Name, Routes: slices.Clone(m.Routes), Cost: maps.Clone(m.Cost), Free: m.Free, Note: m.Note, Deprecated: m.Deprecated, Body: m.Body.clone()}
		for j, s := range m.Routes {
			rfield := fmt.Sprintf("%s.routes[%d]", field, j)
			r, msg := parseRoute(s)
			if msg != "" {
				return nil, nil, specErrorf(rfield, "route %q: %s", s, msg)
			}
			if other, dup := shapes[r.shape]; dup {
				return nil, nil, specErrorf(rfield, "route %q is also a route of %s", s, other)
			}
			shapes[r.shape] = m.Name
			mp.Routes[j] = strings.TrimSpace(s)
			r.m = mp
			routes = append(routes, r)
		}
		t.methods[m.Name] = mp
		t.charges[mp] = quota.Charge{Method: m.Name, Units: maps.Clone(m.Cost)}
		ms = append(ms, *mp)
	}
	return routes, ms, nil
}

// checkMethodCost checks a method's cost: a free method has none, any
// other one a valid cost.
func (t *Table) checkMethodCost(field string, m Method) error {
	switch {
	case m.Free && len(m.Cost) > 0:
		return specErrorf(field+".cost", "a free method has no cost: drop cost or free")
	case !m.Free && len(m.Cost) == 0:
		return specErrorf(field+".cost", "no cost: give the units per budget, e.g. {units: 1}, or mark the method free")
	case !m.Free:
		return t.checkCost(field+".cost", m.Cost)
	}
	return nil
}

// cloneStrs copies s, an empty list as nil: a table has one form, whether
// built in Go or read back from its JSON (which leaves empty lists out).
func cloneStrs(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}

func (t *Table) checkCost(field string, cost map[string]int64) error {
	for _, name := range slices.Sorted(maps.Keys(cost)) {
		n := cost[name]
		b, ok := t.budgets[name]
		if !ok {
			return specErrorf(field+"."+name, "unknown budget %q (budgets: %s)", name, t.budgetNames())
		}
		if n <= 0 {
			return specErrorf(field+"."+name, "cost %d: must be > 0", n)
		}
		if n > b.Limit {
			return specErrorf(field+"."+name, "cost %d is more than the budget's limit %d: it could never be paid", n, b.Limit)
		}
	}
	return nil
}

func (t *Table) budgetNames() string {
	names := make([]string, len(t.Budgets))
	for i, b := range t.Budgets {
		names[i] = b.Name
	}
	return strings.Join(names, ", ")
}

func checkMethodName(s string) string {
	if s == "" {
		return "empty method name"
	}
	if len(s) > 128 {
		return fmt.Sprintf("method name %.20q...: longer than 128 bytes", s)
	}
	for _, r := range s {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Sprintf("method name %q: no spaces or control characters", s)
		}
	}
	return ""
}

func trimInvalid(err error) string {
	return strings.TrimPrefix(err.Error(), quota.ErrInvalid.Error()+": ")
}

// Spec returns a copy of the table's definition, methods sorted by name:
// what `quotactl costs show` prints, and what a JSON file of the table would
// hold.
func (t *Table) Spec() Spec {
	s := t.spec
	s.Hosts = cloneStrs(s.Hosts)
	s.Budgets = slices.Clone(s.Budgets)
	s.Default = maps.Clone(s.Default)
	s.Methods = t.Methods()
	s.Responses = cloneRules(s.Responses)
	if s.Spend != nil {
		sp := *s.Spend
		s.Spend = &sp
	}
	return s
}

// Methods returns a copy of the table's methods, sorted by name.
func (t *Table) Methods() []Method {
	out := make([]Method, len(t.spec.Methods))
	for i, m := range t.spec.Methods {
		out[i] = Method{Name: m.Name, Routes: slices.Clone(m.Routes), Cost: maps.Clone(m.Cost), Free: m.Free, Note: m.Note, Deprecated: m.Deprecated, Body: m.Body.clone()}
	}
	return out
}

// Method returns the named method and whether the table has it.
func (t *Table) Method(name string) (Method, bool) {
	m, ok := t.methods[name]
	if !ok {
		return Method{}, false
	}
	return Method{Name: m.Name, Routes: slices.Clone(m.Routes), Cost: maps.Clone(m.Cost), Free: m.Free, Note: m.Note, Deprecated: m.Deprecated, Body: m.Body.clone()}, true
}

// Default returns the table's default charge for requests that match no
// method, and whether it declares one.
func (t *Table) Default() (quota.Charge, bool) {
	if len(t.def.Units) == 0 {
		return quota.Charge{}, false
	}
	return quota.Charge{Units: maps.Clone(t.def.Units)}, true
}

// Charge returns what one call of the named method costs. A name the table
// does not know gets the default charge if the table declares one, else an
// error wrapping ErrUnknownMethod.
func (t *Table) Charge(method string) (quota.Charge, error) {
	if m, ok := t.methods[method]; ok {
		return m.Charge(), nil
	}
	if len(t.def.Units) > 0 {
		return quota.Charge{Method: method, Units: maps.Clone(t.def.Units)}, nil
	}
	return quota.Charge{}, fmt.Errorf("%w %q in table %s", ErrUnknownMethod, method, t.API)
}

// Estimate returns the units per budget that counts calls of each method
// would take: the cost of a planned run. Counts must be >= 0; a method the
// table does not know is priced as Charge prices it. A run whose cost in a
// budget does not fit in an int64 is an error wrapping quota.ErrInvalid.
func (t *Table) Estimate(counts map[string]int64) (map[string]int64, error) {
	out := make(map[string]int64, len(t.Budgets))
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		n := counts[name]
		if n < 0 {
			return nil, fmt.Errorf("%w: costs: %s: count %d for method %q: must be >= 0", quota.ErrInvalid, t.API, n, name)
		}
		ch, err := t.Charge(name)
		if err != nil {
			return nil, err
		}
		for _, b := range slices.Sorted(maps.Keys(ch.Units)) {
			units := ch.Units[b]
			// units > 0 (New checks it); an overflowing product or sum would
			// wrap to a negative cost that "fits" in any budget.
			if n > 0 && (units > math.MaxInt64/n || out[b] > math.MaxInt64-units*n) {
				return nil, fmt.Errorf("%w: costs: %s: count %d for method %q: the run would cost more than %d units of budget %q",
					quota.ErrInvalid, t.API, n, name, int64(math.MaxInt64), b)
			}
			out[b] += units * n
		}
	}
	return out, nil
}

// Resolve returns the name of the method that httpMethod and target (a
// request path with an optional "?query") call, and whether one matches.
// The default charge plays no part here, nor the table's hosts: Resolve
// reads a path, for planning and for servers that play the API.
func (t *Table) Resolve(httpMethod, target string) (string, bool) {
	path, query, _ := strings.Cut(target, "?")
	r := t.router.match(httpMethod, path, query)
	if r == nil {
		return "", false
	}
	return r.m.Name, true
}

// Price implements quota.Pricer: the charge of the method req calls, found
// from req.Method, req.URL.Path and req.URL.RawQuery. A request to a host
// the table does not name (Spec.Hosts; req.URL.Host, or req.Host when the
// URL has none) is an error wrapping quota.ErrForeignHost: it is not a call
// of the API. A request that matches no method gets the default charge (its
// Method is "VERB /path") if the table declares one, else an error wrapping
// ErrUnknownMethod. A free method's charge has no units. A deprecated method
// (Method.Deprecated) is an error wrapping ErrDeprecated. The returned Units
// map is shared: do not modify it.
func (t *Table) Price(req *http.Request) (quota.Charge, error) {
	ch, _, err := t.price(req)
	return ch, err
}

// price is Price, with the route req matched (nil: the default charge).
func (t *Table) price(req *http.Request) (quota.Charge, *route, error) {
	if !t.pricesHost(req) {
		to := "to " + requestHost(req)
		if to == "to " {
			to = "a request naming no host"
		}
		return quota.Charge{}, nil, fmt.Errorf("%w: table %s prices requests to %s, not %s",
			quota.ErrForeignHost, t.API, strings.Join(t.spec.Hosts, ", "), to)
	}
	if r := t.router.match(req.Method, req.URL.Path, req.URL.RawQuery); r != nil {
		if r.m.Deprecated != "" {
			return quota.Charge{}, nil, fmt.Errorf("%w: %s (%s): not sent, it would spend units on a call the upstream no longer serves",
				ErrDeprecated, r.m.Name, r.m.Deprecated)
		}
		return t.charges[r.m], r, nil
	}
	if len(t.def.Units) > 0 {
		return quota.Charge{Method: req.Method + " " + req.URL.Path, Units: t.def.Units}, nil, nil
	}
	return quota.Charge{}, nil, fmt.Errorf("%w: table %s has no route for %s %s and no default cost; add the method to the table or declare a default",
		ErrUnknownMethod, t.API, req.Method, req.URL.Path)
}
