// Package ghsim is a simulated GitHub REST and GraphQL API on loopback, for
// tests: it meters requests as api.github.com does and answers with GitHub's
// rate-limit headers and error bodies, with its own (injectable) clock.
//
// What it enforces, each from GitHub's documentation (read 2026-11-28):
//
//   - Primary rate limits per user, per resource
//     (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api):
//     "core" 5,000 requests an hour for an authenticated user ("All of these
//     requests count towards your personal rate limit of 5,000 requests per
//     hour"), "search" 30 a minute and "code_search" 10 a minute
//     (https://docs.github.com/en/rest/search/search#rate-limit), GraphQL
//     5,000 points an hour
//     (https://docs.github.com/en/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api).
//     Every token of one user spends the user's quota (WithUser), as
//     personal access tokens, OAuth and GitHub App user tokens do; a token
//     no user claims is a user of its own. Limits differ per owner
//     (WithOwnerLimit): 15,000 an hour for a GitHub App of an Enterprise
//     Cloud organization, 1,000 an hour for GITHUB_TOKEN in Actions.
//     Requests without a token are metered per client IP at 60 an hour
//     ("The primary rate limit for unauthenticated requests is 60 requests
//     per hour") and 10 searches a minute.
//   - Windows: a resource's window starts at the first request counted
//     against it and lasts its length (an hour, a minute); x-ratelimit-reset
//     is its end in UTC epoch seconds. GitHub does not publish how its window
//     runs; a window from the first request is what its headers show (reset
//     an hour after the first call, not at a clock hour).
//   - Headers: every response carries x-ratelimit-limit, -remaining, -used,
//     -reset and -resource for the resource the request counted against
//     ("Checking the status of your rate limit").
//   - Exceeding a primary limit: "you will receive a 403 or 429 response,
//     and the x-ratelimit-remaining header will be 0" (WithPrimaryStatus
//     picks which; default 403), body {"message": "API rate limit exceeded
//     for user ID N. ...", "documentation_url": ...}. For GraphQL the status
//     is 200 with an errors list of type RATE_LIMITED ("If you exceed your
//     primary rate limit, the response status will still be 200").
//   - Secondary limit: "No more than 900 points per minute are allowed for
//     REST API endpoints, and no more than 2,000 points per minute are
//     allowed for the GraphQL API endpoint"; GET, HEAD and OPTIONS cost 1
//     point, POST, PATCH, PUT and DELETE 5, a GraphQL query 1 and a
//     mutation 5 ("Calculating points for the secondary rate limit"). Kept
//     per user and endpoint (the request path) in one-minute windows from the
//     first request; past it, 403 (or 429, WithSecondaryStatus) with
//     retry-after and "You have exceeded a secondary rate limit". A request
//     refused by a limit is not counted against any.
//   - GET /rate_limit returns the resources document and does not count
//     against a primary limit ("Calling this endpoint does not count against
//     your primary rate limit, but it can count against your secondary rate
//     limit").
//
// It counts what it serves and refuses (Requests, Served, PrimaryErrors,
// SecondaryErrors) and what each user spent (Used, Spent), and Spend charges
// a user's quota the way an unmetered client sharing the token would.
package ghsim

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Resources the server meters, as GitHub names them in x-ratelimit-resource
// and in GET /rate_limit.
const (
	Core       = "core"
	Search     = "search"
	CodeSearch = "code_search"
	GraphQL    = "graphql"
)

// Limits GitHub grants some owners instead of the defaults (WithOwnerLimit).
const (
	// EnterpriseCloudCore is the core limit of a GitHub App owned by a
	// GitHub Enterprise Cloud organization, and of its installations.
	EnterpriseCloudCore = 15000
	// ActionsTokenCore is the core limit of GITHUB_TOKEN in GitHub Actions
	// (per repository).
	ActionsTokenCore = 1000
)

// resourceSpec is one resource's default limit and window.
type resourceSpec struct {
	limit  int64
	window time.Duration
}

var defaultResources = map[string]resourceSpec{
	Core:       {5000, time.Hour},
	Search:     {30, time.Minute},
	CodeSearch: {10, time.Minute},
	GraphQL:    {5000, time.Hour},
}

// unauthenticated limits, per client IP.
var anonymousLimits = map[string]int64{Core: 60, Search: 10, CodeSearch: 10, GraphQL: 0}

// Secondary limit defaults, points per minute per endpoint.
const (
	DefaultSecondaryREST    = 900
	DefaultSecondaryGraphQL = 2000
)

// Server is a simulated GitHub API. It is an http.Handler; New also starts
// it on a loopback port (URL). Safe for concurrent use.
type Server struct {
	ts              *httptest.Server
	clock           func() time.Time
	users           map[string]user             // token -> user
	ownerLimits     map[string]map[string]int64 // login -> resource -> limit
	limits          map[string]int64            // resource -> default limit
	primaryStatus   int
	secondaryStatus int
	secondaryREST   int64
	secondaryGQL    int64
	gqlCost         func(query string, variables map[string]any) int64

	mu        sync.Mutex
	windows   map[string]map[string]*window // owner -> resource -> window
	secondary map[string]map[string]*window // owner -> endpoint -> window
	spent     map[string]map[string]int64   // owner -> resource -> units ever spent
	requests  int64
	served    int64
	primary   int64
	second    int64
	seq       int64
	nextID    int64
	ids       map[string]int64 // owner login -> user ID
}

type user struct {
	login string
	id    int64
}

// window is one fixed window: it began at start and ends at end (whole
// epoch seconds); used counts within it.
type window struct {
	start, end time.Time
	used       int64
}

// Option configures a Server in New.
type Option func(*Server)

// WithClock sets the server's clock. Default: time.Now.
func WithClock(clock func() time.Time) Option { return func(s *Server) { s.clock = clock } }

// WithUser makes tokens belong to the user login with the numeric id (the
// ID GitHub's rate-limit message names): they share the user's quota.
// Default: every token is a user of its own.
func WithUser(login string, id int64, tokens ...string) Option {
	return func(s *Server) {
		for _, t := range tokens {
			s.users[t] = user{login: login, id: id}
		}
		s.ids[login] = id
	}
}

// WithLimit sets a resource's limit for every owner that has no limit of
// its own (WithOwnerLimit), e.g. WithLimit(ghsim.Core, 100) for a quota
// that runs out within a short test.
func WithLimit(resource string, limit int64) Option {
	return func(s *Server) { s.limits[resource] = limit }
}

// WithOwnerLimit sets one owner's limit for a resource, e.g.
// WithOwnerLimit("ci-bot", ghsim.Core, ghsim.EnterpriseCloudCore).
func WithOwnerLimit(login, resource string, limit int64) Option {
	return func(s *Server) {
		m := s.ownerLimits[login]
		if m == nil {
			m = map[string]int64{}
			s.ownerLimits[login] = m
		}
		m[resource] = limit
	}
}

// WithPrimaryStatus sets the status of a REST request refused by a primary
// limit: 403 (the default) or 429; GitHub documents both.
func WithPrimaryStatus(code int) Option { return func(s *Server) { s.primaryStatus = code } }

// WithSecondaryStatus sets the status of a request refused by the
// secondary limit: 403 (the default) or 429.
func WithSecondaryStatus(code int) Option { return func(s *Server) { s.secondaryStatus = code } }

// WithSecondaryLimits sets the secondary limits in points per minute per
// endpoint: rest for REST endpoints, graphql for POST /graphql. 0 turns one
// off. Defaults: 900 and 2,000.
func WithSecondaryLimits(rest, graphql int64) Option {
	return func(s *Server) { s.secondaryREST, s.secondaryGQL = rest, graphql }
}

// WithGraphQLCost sets how many primary points a GraphQL request costs.
// Default: GitHub's published formula (QueryCost).
func WithGraphQLCost(cost func(query string, variables map[string]any) int64) Option {
	return func(s *Server) { s.gqlCost = cost }
}

// New returns a Server listening on a loopback port. Close it when done.
func New(opts ...Option) *Server {
	s := NewHandler(opts...)
	s.ts = httptest.NewServer(s)
	return s
}

// NewHandler returns a Server that is not listening: serve it yourself as
// an http.Handler (httptest.NewServer, httptest.NewRecorder). URL returns ""
// and Close does nothing.
func NewHandler(opts ...Option) *Server {
	s := &Server{
		clock:           time.Now,
		users:           map[string]user{},
		ownerLimits:     map[string]map[string]int64{},
		limits:          map[string]int64{},
		primaryStatus:   http.StatusForbidden,
		secondaryStatus: http.StatusForbidden,
		secondaryREST:   DefaultSecondaryREST,
		secondaryGQL:    DefaultSecondaryGraphQL,
		windows:         map[string]map[string]*window{},
		secondary:       map[string]map[string]*window{},
		spent:           map[string]map[string]int64{},
		ids:             map[string]int64{},
		nextID:          1000,
	}
	for _, o := range opts {
		o(s)
	}
	if s.gqlCost == nil {
		s.gqlCost = QueryCost
	}
	return s
}

// URL returns the server's base URL, e.g. "http://127.0.0.1:39817"; API
// paths follow it. "" for a server made by NewHandler.
func (s *Server) URL() string {
	if s.ts == nil {
		return ""
	}
	return s.ts.URL
}

// Host returns the host and port the server listens on: what a cost table
// must name to price requests to it (costs.Table.WithHosts). "" for a
// server made by NewHandler.
func (s *Server) Host() string {
	if s.ts == nil {
		return ""
	}
	return s.ts.Listener.Addr().String()
}

// Close shuts the server down.
func (s *Server) Close() {
	if s.ts != nil {
		s.ts.Close()
	}
}

// Owner returns the owner whose quota token spends: the login of the user
// WithUser gave it, else the token itself.
func (s *Server) Owner(token string) string {
	if u, ok := s.users[token]; ok {
		return u.login
	}
	return token
}

// Limit returns the owner's limit for resource.
func (s *Server) Limit(owner, resource string) int64 {
	if strings.HasPrefix(owner, anonPrefix) {
		return anonymousLimits[resource]
	}
	if l, ok := s.ownerLimits[owner][resource]; ok {
		return l
	}
	if l, ok := s.limits[resource]; ok {
		return l
	}
	return defaultResources[resource].limit
}

// Used returns what the owner of token has used of resource in its current
// window (0 when no window is open): what x-ratelimit-used says.
func (s *Server) Used(token, resource string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.current(s.Owner(token), resource, s.clock()); w != nil {
		return w.used
	}
	return 0
}

// Reset returns when the current window of resource for the owner of token
// ends (zero when none is open).
func (s *Server) Reset(token, resource string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.current(s.Owner(token), resource, s.clock()); w != nil {
		return w.end
	}
	return time.Time{}
}

// Spent returns all the units the owner of token ever spent of resource.
func (s *Server) Spent(token, resource string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spent[s.Owner(token)][resource]
}

// Spend charges n units of resource to the owner of token, as an unmetered
// client sharing the token (a CI job, a person's CLI) would by calling the
// API, and reports whether the upstream would have served it (false: the
// limit left less than n, and nothing was charged).
func (s *Server) Spend(token, resource string, n int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.chargePrimary(s.Owner(token), resource, n, s.clock())
	return ok
}

// Requests returns how many requests the server received.
func (s *Server) Requests() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Served returns how many requests the server answered without a rate-limit
// error.
func (s *Server) Served() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served
}

// PrimaryErrors returns how many requests a primary limit refused.
func (s *Server) PrimaryErrors() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.primary
}

// SecondaryErrors returns how many requests the secondary limit refused.
func (s *Server) SecondaryErrors() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.second
}
