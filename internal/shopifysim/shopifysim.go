// Package shopifysim is a simulated Shopify Admin GraphQL API (POST
// /admin/api/{version}/graphql.json) on loopback, for tests and examples,
// with Shopify's calculated query costs and its leaky bucket per app and
// shop. Behaviour and its sources (read 2026-11-28; see
// costs/profiles/shopify-admin.yaml for the copies read):
//
//   - Every query has a requested cost, calculated before it runs, and an
//     actual cost after (https://shopify.dev/docs/apps/build/apis/graphql-admin/rate-limits).
//     The simulator's rule (see cost) is modelled on Shopify's: scalars 0,
//     objects 1, connections 2 plus first/last items times an item's cost,
//     mutations 10. The actual cost counts the items the shop really has
//     (WithItems), so it is at most the requested cost.
//   - A bucket per shop holds maximumAvailable points and restores
//     restoreRate a second (WithBucket; default 2,000 and 100). A query
//     needs its requested cost in the bucket; it takes the requested cost,
//     runs, and gives back requested - actual.
//   - A query the bucket cannot pay is answered with HTTP 200 and
//     {"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED",
//     "documentation":...}}],"extensions":{"cost":{"requestedQueryCost":N,
//     "actualQueryCost":null,"throttleStatus":{...}}}}: Shopify's
//     documented throttled response, sent with 200 as Shopify's GraphQL
//     responses are.
//   - A query requesting more than 1,000 points ("a single query may not
//     exceed 1,000 points") is refused with the error code
//     MAX_COST_EXCEEDED, also with 200, and takes nothing.
//   - Every answered query carries extensions.cost {requestedQueryCost,
//     actualQueryCost, throttleStatus {maximumAvailable,
//     currentlyAvailable, restoreRate}}.
//
// The credential is the X-Shopify-Access-Token header; tokens belong to a
// shop (WithShop), each token a shop of its own by default. The server
// counts requests, THROTTLED answers and the actual cost charged per shop.
package shopifysim

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/quotactl/quotactl/internal/simbucket"
)

// MaxQueryCost is the most one query may request.
const MaxQueryCost = 1000

// Server is a simulated Shopify Admin GraphQL API. Safe for concurrent use.
type Server struct {
	ts         *httptest.Server
	clock      func() time.Time
	max, rate  int64
	items      int64
	shop       map[string]string
	mu         sync.Mutex
	buckets    map[string]*simbucket.Bucket
	charged    map[string]int64
	requests   int64
	throttled  int64
	maxCostErr int64
}

// Option configures a Server.
type Option func(*Server)

// WithClock sets the server's clock. Default: time.Now.
func WithClock(clock func() time.Time) Option { return func(s *Server) { s.clock = clock } }

// WithBucket sets every shop's bucket: maximumAvailable points, restored
// restoreRate a second. Default: 2,000 and 100.
func WithBucket(maximumAvailable, restoreRate int64) Option {
	return func(s *Server) { s.max, s.rate = maximumAvailable, restoreRate }
}

// WithItems sets how many items every connection of the shop has: a
// connection asking for first: N returns min(N, items). Default: 5.
func WithItems(n int64) Option { return func(s *Server) { s.items = n } }

// WithShop makes access tokens belong to shop: they share its bucket.
func WithShop(shop string, tokens ...string) Option {
	return func(s *Server) {
		for _, t := range tokens {
			s.shop[t] = shop
		}
	}
}

// New returns a Server listening on a loopback port. Close it when done.
func New(opts ...Option) *Server {
	s := NewHandler(opts...)
	s.ts = httptest.NewServer(s)
	return s
}

// NewHandler returns a Server that is not listening.
func NewHandler(opts ...Option) *Server {
	s := &Server{clock: time.Now, max: 2000, rate: 100, items: 5, shop: map[string]string{},
		buckets: map[string]*simbucket.Bucket{}, charged: map[string]int64{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// URL returns the base URL ("" from NewHandler).
func (s *Server) URL() string {
	if s.ts == nil {
		return ""
	}
	return s.ts.URL
}

// Host returns the host:port the server listens on.
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

// Shop returns the shop token belongs to.
func (s *Server) Shop(token string) string {
	if sh, ok := s.shop[token]; ok {
		return sh
	}
	return token
}

// Charged returns the points shop was charged: the sum of the actual costs
// of the queries that ran.
func (s *Server) Charged(shop string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.charged[shop]
}

// Available returns the points in shop's bucket now.
func (s *Server) Available(shop string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bucket(shop).Available(s.clock())
}

// Requests returns how many requests the server received.
func (s *Server) Requests() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Throttled returns how many THROTTLED answers the server sent.
func (s *Server) Throttled() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.throttled
}

// MaxCostExceeded returns how many queries were refused for requesting
// more than MaxQueryCost.
func (s *Server) MaxCostExceeded() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxCostErr
}

func (s *Server) bucket(shop string) *simbucket.Bucket {
	b := s.buckets[shop]
	if b == nil {
		// restoreRate a second: max points over max/rate seconds.
		b = simbucket.New(s.max, time.Duration(s.max)*time.Second/time.Duration(s.rate), s.clock())
		s.buckets[shop] = b
	}
	return b
}

type gqlError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client went away
}

// ServeHTTP serves one GraphQL request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	s.mu.Unlock()
	token := r.Header.Get("X-Shopify-Access-Token")
	if token == "" {
		writeJSON(w, 401, map[string]any{"errors": "[API] Invalid API key or access token (unrecognized login or wrong password)"})
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if r.Method != http.MethodPost || len(parts) != 4 || parts[0] != "admin" || parts[1] != "api" || parts[3] != "graphql.json" {
		writeJSON(w, 404, map[string]any{"errors": "Not Found"})
		return
	}
	var req struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil || req.Query == "" {
		writeJSON(w, 400, map[string]any{"errors": map[string]string{"query": "Required parameter missing or invalid"}})
		return
	}
	o, msg := parse(req.Query, req.Variables)
	if msg != "" {
		writeJSON(w, 200, map[string]any{"errors": []gqlError{{Message: msg}}})
		return
	}
	s.serve(w, s.Shop(token), o)
}

func (s *Server) serve(w http.ResponseWriter, shop string, o *op) {
	requested, actual := o.cost(-1), o.cost(s.items)
	s.mu.Lock()
	now := s.clock()
	b := s.bucket(shop)
	var errs []gqlError
	var actualCost any
	switch {
	case requested > MaxQueryCost:
		s.maxCostErr++
		errs = []gqlError{{
			Message: "Query cost is " + itoa(requested) + ", which exceeds the single query max cost limit (" + itoa(MaxQueryCost) + ").",
			Extensions: map[string]any{"code": "MAX_COST_EXCEEDED", "cost": requested, "maxCost": MaxQueryCost,
				"documentation": "https://shopify.dev/api/usage/limits#rate-limits"},
		}}
	case !b.Take(now, requested):
		s.throttled++
		errs = []gqlError{{Message: "Throttled", Extensions: map[string]any{"code": "THROTTLED",
			"documentation": "https://shopify.dev/api/usage/limits#rate-limits"}}}
	default:
		b.Give(now, requested-actual)
		s.charged[shop] += actual
		actualCost = actual
	}
	status := map[string]any{
		"maximumAvailable":   float64(s.max),
		"currentlyAvailable": float64(b.Available(now)),
		"restoreRate":        float64(s.rate),
	}
	s.mu.Unlock()
	resp := map[string]any{"extensions": map[string]any{"cost": map[string]any{
		"requestedQueryCost": requested, "actualQueryCost": actualCost, "throttleStatus": status,
	}}}
	if errs != nil {
		resp["errors"] = errs
	} else {
		resp["data"] = data(o.sel, s.items, "Node", 0)
	}
	writeJSON(w, 200, resp)
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
