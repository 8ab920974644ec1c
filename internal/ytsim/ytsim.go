// Package ytsim is a simulated YouTube Data API v3 server on loopback, for
// tests and for the examples: it serves enough of the API for ingestion
// (videos.list chart=mostPopular with paging, videos.list by id,
// search.list), accepts every route of the cost table with a minimal JSON
// body, and enforces Google's quota rules itself, per Google Cloud project,
// with its own (injectable) clock: the same cost table, reset at midnight
// America/Los_Angeles, answered with Google's documented error bodies (403
// quotaExceeded when the shared units pool is spent; 429 RESOURCE_EXHAUSTED
// with a google.rpc.ErrorInfo naming the bucket (quota_limit,
// quota_limit_value, window_start_time) when a per-method bucket such as
// search.list's or videos.insert's is spent, WithBucket; 400 keyInvalid for
// a missing or unknown key; 400 uploadLimitExceeded past a channel's upload
// cap, WithUploadCap). Spend charges a project as a client the meter does
// not see would.
//
// Keys belong to projects (WithProject); every key of a project shares its
// quota, as Google bills it. A key no project claims is a project of its
// own.
//
// It counts what it charges per project and budget (Used, Charged) and
// what it receives per key (Received), so a test can check the meter
// against the upstream, and it injects failures on demand (Inject): 5xx
// answers, per-minute and daily 429s with Retry-After, dropped connections.
package ytsim

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/quota"
)

// Server is a simulated YouTube Data API. It is an http.Handler; New also
// starts it on a loopback port (URL). Safe for concurrent use.
type Server struct {
	ts      *httptest.Server
	table   *costs.Table
	rules   *costs.Table // table for any host: the server plays the API whatever host a request names
	clock   func() time.Time
	keys    map[string]bool   // nil: every non-empty key is valid
	project map[string]string // key -> project; a key not here is its own project
	upCap   int               // uploads per key per 24 hours; 0: no cap
	limits  map[string]int64
	buckets map[string]Bucket // budget -> per-method bucket answered with a 429 ErrorInfo
	popular int               // mostPopular items per region
	results int               // search results per query

	mu       sync.Mutex
	state    map[string]*keyState        // per project
	received map[string]map[string]int64 // key -> budget -> requests
	uploads  map[string][]time.Time      // key -> accepted uploads, oldest first
	faults   []Fault
	requests int64
	exceeded int64
	seq      int64
}

// keyState is one project's quota.
type keyState struct {
	day     map[string]dayCount // budget -> today's usage
	charged map[string]int64    // budget -> units ever charged
}

type dayCount struct {
	start time.Time // the window start the count belongs to
	used  int64
}

// Option configures a Server in New.
type Option func(*Server)

// WithClock sets the server's clock, which decides the day its quota counts
// belong to. Default: time.Now.
func WithClock(clock func() time.Time) Option { return func(s *Server) { s.clock = clock } }

// WithTable sets the cost table the server enforces. Default:
// costs.Builtin("youtube").
func WithTable(t *costs.Table) Option { return func(s *Server) { s.table = t } }

// WithLimit overrides one budget's daily limit, e.g. WithLimit("units", 500)
// for a project whose quota runs out within a short run. Default: the
// table's limits.
func WithLimit(budget string, limit int64) Option {
	return func(s *Server) { s.limits[budget] = limit }
}

// WithKeys makes only the given API keys (or bearer tokens) valid; others
// get 400 keyInvalid. Default: every non-empty key is valid.
func WithKeys(keys ...string) Option {
	return func(s *Server) {
		s.keys = map[string]bool{}
		for _, k := range keys {
			s.keys[k] = true
		}
	}
}

// WithProject makes keys (API keys or bearer tokens) belong to project:
// they share its quota, as the keys and tokens of one Google Cloud project
// do. Default: every key is a project of its own.
func WithProject(project string, keys ...string) Option {
	return func(s *Server) {
		for _, k := range keys {
			s.project[k] = project
		}
	}
}

// WithUploadCap caps the videos.insert calls one key (a channel) may make in
// any 24 hours: past it the server answers 400 uploadLimitExceeded, as
// YouTube does per channel, and bills the call like any invalid request.
// Default: no cap.
func WithUploadCap(n int) Option { return func(s *Server) { s.upCap = n } }

// WithPopular sets how many videos chart=mostPopular lists per region
// (paged by maxResults). Default: 200, as YouTube does.
func WithPopular(n int) Option { return func(s *Server) { s.popular = n } }

// WithSearchResults sets how many results search.list has per query.
// Default: 100.
func WithSearchResults(n int) Option { return func(s *Server) { s.results = n } }

// New returns a Server listening on a loopback port. Close it when done.
func New(opts ...Option) *Server {
	s := newServer(opts...)
	s.ts = httptest.NewServer(s)
	return s
}

// NewHandler returns a Server that is not listening: serve it yourself as
// an http.Handler. URL returns "" and Close does nothing.
func NewHandler(opts ...Option) *Server { return newServer(opts...) }

func newServer(opts ...Option) *Server {
	s := &Server{
		clock:    time.Now,
		limits:   map[string]int64{},
		project:  map[string]string{},
		popular:  200,
		results:  100,
		state:    map[string]*keyState{},
		received: map[string]map[string]int64{},
		uploads:  map[string][]time.Time{},
		buckets:  maps.Clone(defaultBuckets),
	}
	for _, o := range opts {
		o(s)
	}
	if s.table == nil {
		t, err := costs.Builtin("youtube")
		if err != nil {
			panic("ytsim: " + err.Error())
		}
		s.table = t
	}
	rules, err := s.table.WithHosts()
	if err != nil {
		panic("ytsim: " + err.Error())
	}
	s.rules = rules
	return s
}

// URL returns the server's base URL, e.g. "http://127.0.0.1:39817". API
// paths follow it: URL()+"/youtube/v3/videos?...".
func (s *Server) URL() string {
	if s.ts == nil {
		return ""
	}
	return s.ts.URL
}

// Host returns the host and port the server listens on, e.g.
// "127.0.0.1:39817": what a cost table must name to price requests to it
// (costs.Table.WithHosts). "" for a server made by NewHandler.
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

// Table returns the cost table the server enforces.
func (s *Server) Table() *costs.Table { return s.table }

// Fault is a failure the server answers one request with instead of
// serving it (see Inject).
type Fault struct {
	// Status is the HTTP status to answer with, e.g. 503 or 429.
	Status int
	// Drop hijacks the connection and closes it without answering.
	Drop bool
	// RetryAfter, when > 0, sets the Retry-After header (whole seconds).
	RetryAfter time.Duration
	// Reason is the error reason in the body. Defaults: backendError for
	// 5xx, rateLimitExceeded for 429, quotaExceeded for 403.
	//
	// A 429 names its quota limit as Google does, in the message and the
	// google.rpc.ErrorInfo detail: per minute unless Daily is set.
	//
	// The server bills a faulted request as Google does: every request that
	// reaches it, except those refused because a quota is spent (the faults
	// the cost table's response rules read as exhausting a budget of the
	// request's method, such as a 403 quotaExceeded).
	Reason string
	// Path limits the fault to requests whose path has this prefix; empty
	// matches any request.
	Path string
	// Daily makes a 429 name a per-day limit (the daily quota is spent)
	// instead of a per-minute one (a short-term throttle).
	Daily bool
}

// Inject queues faults: each later request (with a valid key, and a path
// matching the fault's Path) is answered with the first matching queued
// fault, which is then used up.
func (s *Server) Inject(faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, faults...)
}

// Project returns the project key belongs to (key itself when no project
// claims it).
func (s *Server) Project(key string) string {
	if p, ok := s.project[key]; ok {
		return p
	}
	return key
}

// Used returns the units the project of key has been charged in budget
// today (by the server's clock): what the upstream's console would show.
func (s *Server) Used(key, budget string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state[s.Project(key)]
	if st == nil {
		return 0
	}
	b, ok := s.budget(budget)
	if !ok {
		return 0
	}
	dc := st.day[budget]
	if !dc.start.Equal(b.Window.Start(s.clock())) {
		return 0
	}
	return dc.used
}

// Charged returns all the units the project of key was ever charged in
// budget.
func (s *Server) Charged(key, budget string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.state[s.Project(key)]; st != nil {
		return st.charged[budget]
	}
	return 0
}

// Received returns how many requests with key the server received for
// methods that charge budget, whether it served, failed or refused them.
func (s *Server) Received(key, budget string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.received[key][budget]
}

// QuotaExceeded returns how many requests the server refused because a
// project's quota was spent: 403 quotaExceeded for the shared pool, 429
// RATE_LIMIT_EXCEEDED for a per-method bucket.
func (s *Server) QuotaExceeded() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exceeded
}

// Requests returns how many requests the server received in all.
func (s *Server) Requests() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

func (s *Server) budget(name string) (quota.Budget, bool) {
	for _, b := range s.table.Budgets {
		if b.Name == name {
			if l, ok := s.limits[name]; ok {
				b.Limit = l
			}
			return b, true
		}
	}
	return quota.Budget{}, false
}

// ServeHTTP serves one API request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	s.mu.Unlock()

	key := apiKey(r)
	if key == "" || s.keys != nil && !s.keys[key] {
		writeError(w, http.StatusBadRequest, "API key not valid. Please pass a valid API key.", "usageLimits", "keyInvalid", "INVALID_ARGUMENT")
		return
	}
	name, ok := s.table.Resolve(r.Method, r.URL.Path+"?"+r.URL.RawQuery)
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found", "global", "notFound", "NOT_FOUND")
		return
	}
	m, _ := s.table.Method(name)

	s.mu.Lock()
	st := s.keyState(s.Project(key))
	rc := s.received[key]
	if rc == nil {
		rc = map[string]int64{}
		s.received[key] = rc
	}
	for b := range m.Cost {
		rc[b]++
	}
	fault, hasFault := s.popFault(r.URL.Path)
	if hasFault && !s.billed(r, fault) {
		s.mu.Unlock()
		s.writeFault(w, fault)
		return
	}
	if spent := s.charge(st, m.Cost); spent != "" {
		s.exceeded++
		s.mu.Unlock()
		s.writeSpent(w, spent, s.clock())
		return
	}
	if name == "videos.insert" && !hasFault && !s.upload(key) {
		s.mu.Unlock()
		writeError(w, http.StatusBadRequest, uploadMessage, "youtube.video", "uploadLimitExceeded", "")
		return
	}
	s.seq++
	seq := s.seq
	s.mu.Unlock()

	if hasFault {
		s.writeFault(w, fault)
		return
	}
	s.serve(w, r, name, seq)
}

func (s *Server) keyState(project string) *keyState {
	st := s.state[project]
	if st == nil {
		st = &keyState{day: map[string]dayCount{}, charged: map[string]int64{}}
		s.state[project] = st
	}
	return st
}

// upload records an upload by key (a channel) and reports whether its
// 24-hour cap allows it. A refused upload was billed (charge ran first),
// as Google bills every request, invalid ones included.
func (s *Server) upload(key string) bool {
	if s.upCap <= 0 {
		return true
	}
	now := s.clock()
	ups := s.uploads[key]
	for len(ups) > 0 && !ups[0].After(now.Add(-24*time.Hour)) {
		ups = ups[1:]
	}
	if len(ups) >= s.upCap {
		s.uploads[key] = ups
		return false
	}
	s.uploads[key] = append(ups, now)
	return true
}

// charge takes cost from key's budgets today, all or nothing; it returns
// the budget that cannot pay, or "".
func (s *Server) charge(st *keyState, cost map[string]int64) string {
	now := s.clock()
	for name, n := range cost {
		b, _ := s.budget(name)
		start := b.Window.Start(now)
		dc := st.day[name]
		if !dc.start.Equal(start) {
			dc = dayCount{start: start}
			st.day[name] = dc
		}
		if dc.used+n > b.Limit {
			return name
		}
	}
	for name, n := range cost {
		dc := st.day[name]
		dc.used += n
		st.day[name] = dc
		st.charged[name] += n
	}
	return ""
}
