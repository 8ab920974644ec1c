// Package ytsim is a simulated YouTube Data API v3 server on loopback, for
// tests and for the examples: it serves enough of the API for ingestion
// (videos.list chart=mostPopular with paging, videos.list by id,
// search.list), accepts every route of the cost table with a minimal JSON
// body, and enforces Google's quota rules itself, per Google Cloud project,
// with its own (injectable) clock: the same cost table, reset at midnight
// America/Los_Angeles, answered with Google's documented error bodies (403
// quotaExceeded; 400 keyInvalid for a missing or unknown key; 400
// uploadLimitExceeded past a channel's upload cap, WithUploadCap).
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
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
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
	popular int // mostPopular items per region
	results int // search results per query

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

// QuotaExceeded returns how many requests the server refused with 403
// quotaExceeded because a project's quota was spent.
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
		writeQuotaExceeded(w)
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

func (s *Server) popFault(path string) (Fault, bool) {
	for i, f := range s.faults {
		if strings.HasPrefix(path, f.Path) {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
			return f, true
		}
	}
	return Fault{}, false
}

// billed reports whether the upstream bills a request it answers with f.
// Google bills every request that reaches it, failed ones included, except
// those it refuses because a quota is spent: the faults the cost table's
// response rules read as exhausting a budget the request's method charges.
func (s *Server) billed(r *http.Request, f Fault) bool {
	if f.Drop {
		return true
	}
	status, header, body := faultResponse(f)
	v := s.rules.Classify(r, &http.Response{StatusCode: status, Header: header}, body)
	return len(v.Exhausted) == 0
}

// faultResponse returns the answer to a request failed with f (not Drop).
func faultResponse(f Fault) (int, http.Header, []byte) {
	h := http.Header{"Content-Type": {"application/json; charset=UTF-8"}}
	if f.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((f.RetryAfter+time.Second-1)/time.Second)))
	}
	reason := f.Reason
	var body []byte
	switch {
	case f.Status == http.StatusForbidden && (reason == "" || reason == "quotaExceeded"):
		body = errorBody(f.Status, quotaMessage, "youtube.quota", "quotaExceeded", "")
	case f.Status == http.StatusTooManyRequests:
		if reason == "" {
			reason = "rateLimitExceeded"
		}
		body = RateLimitBody(reason, f.Daily)
	case f.Status == http.StatusBadRequest && reason == "uploadLimitExceeded":
		body = errorBody(f.Status, uploadMessage, "youtube.video", reason, "")
	case f.Status >= 500:
		if reason == "" {
			reason = "backendError"
		}
		body = errorBody(f.Status, "Backend Error", "global", reason, "UNAVAILABLE")
	default:
		body = errorBody(f.Status, http.StatusText(f.Status), "global", reason, "")
	}
	return f.Status, h, body
}

func (s *Server) writeFault(w http.ResponseWriter, f Fault) {
	if f.Drop {
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic(http.ErrAbortHandler) // HTTP/2: abort the stream
		}
		conn, _, err := hj.Hijack()
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // reset, not a graceful close
			}
			_ = conn.Close()
		}
		return
	}
	status, header, body := faultResponse(f)
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// apiKey returns the credential of a request: the key parameter, the
// X-Goog-Api-Key header, or a bearer token.
func apiKey(r *http.Request) string {
	if k := r.URL.Query().Get("key"); k != "" {
		return k
	}
	if k := r.Header.Get("X-Goog-Api-Key"); k != "" {
		return k
	}
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}

// uploadMessage is Google's message for a channel past its upload cap.
const uploadMessage = "The user has exceeded the number of videos they may upload."

// RateLimitBody returns the body of a 429 in Google's documented shape: the
// v1 errors[] list with reason, and a google.rpc.ErrorInfo detail
// (RATE_LIMIT_EXCEEDED) whose metadata.quota_limit, like the message, names
// a per-minute limit, or a per-day one when daily is set.
func RateLimitBody(reason string, daily bool) []byte {
	period, limit := "minute", "DefaultRequestsPerMinutePerProject"
	if daily {
		period, limit = "day", "DefaultRequestsPerDayPerProject"
	}
	msg := "Quota exceeded for quota metric 'Queries' and limit 'Queries per " + period +
		"' of service 'youtube.googleapis.com' for consumer 'project_number:123456789'."
	type item struct {
		Message string `json:"message"`
		Domain  string `json:"domain"`
		Reason  string `json:"reason"`
	}
	type detail struct {
		Type     string            `json:"@type"`
		Reason   string            `json:"reason"`
		Domain   string            `json:"domain"`
		Metadata map[string]string `json:"metadata"`
	}
	type body struct {
		Code    int      `json:"code"`
		Message string   `json:"message"`
		Errors  []item   `json:"errors"`
		Status  string   `json:"status"`
		Details []detail `json:"details"`
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]body{"error": {
		Code: http.StatusTooManyRequests, Message: msg, Errors: []item{{msg, "global", reason}}, Status: "RESOURCE_EXHAUSTED",
		Details: []detail{{
			Type: "type.googleapis.com/google.rpc.ErrorInfo", Reason: "RATE_LIMIT_EXCEEDED", Domain: "googleapis.com",
			Metadata: map[string]string{
				"consumer": "projects/123456789", "service": "youtube.googleapis.com",
				"quota_metric": "youtube.googleapis.com/default", "quota_limit": limit,
			},
		}},
	}})
	return buf.Bytes()
}

// quotaMessage is Google's message for a spent daily quota.
const quotaMessage = `The request cannot be completed because you have exceeded your <a href="/youtube/v3/getting-started#quota">quota</a>.`

func writeQuotaExceeded(w http.ResponseWriter) {
	writeError(w, http.StatusForbidden, quotaMessage, "youtube.quota", "quotaExceeded", "")
}

// writeError writes a Google API error response.
func writeError(w http.ResponseWriter, code int, msg, domain, reason, status string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_, _ = w.Write(errorBody(code, msg, domain, reason, status))
}

// errorBody returns a Google API error body:
// {"error":{"code":N,"message":M,"errors":[{"message":M,"domain":D,"reason":R}],"status":S}}.
func errorBody(code int, msg, domain, reason, status string) []byte {
	type item struct {
		Message string `json:"message"`
		Domain  string `json:"domain"`
		Reason  string `json:"reason"`
	}
	type body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Errors  []item `json:"errors"`
		Status  string `json:"status,omitempty"`
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]body{"error": {Code: code, Message: msg, Errors: []item{{msg, domain, reason}}, Status: status}})
	return buf.Bytes()
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// serve answers a charged request.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, method string, seq int64) {
	q := r.URL.Query()
	switch method {
	case "videos.list":
		s.videosList(w, q)
		return
	case "search.list":
		s.searchList(w, q)
		return
	case "captions.download":
		w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
		_, _ = fmt.Fprint(w, "1\n00:00:00,000 --> 00:00:01,000\nsimulated caption\n")
		return
	case "media.upload":
		writeJSON(w, http.StatusOK, map[string]any{"kind": "youtube#video", "id": fmt.Sprintf("sim-%d", seq)})
		return
	}
	resource, verb, _ := strings.Cut(method, ".")
	switch r.Method {
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	case http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{
			"kind": "youtube#" + resource + "ListResponse", "etag": etag(method), "items": []any{},
			"pageInfo": map[string]int{"totalResults": 0, "resultsPerPage": 0},
		})
	default:
		writeJSON(w, http.StatusOK, map[string]any{
			"kind": "youtube#" + strings.TrimSuffix(resource, "s"), "etag": etag(method + verb), "id": fmt.Sprintf("sim-%d", seq),
		})
	}
}

// --- deterministic data ---

// Video is the subset of a video resource the simulator returns.
type Video struct {
	Kind       string          `json:"kind"`
	Etag       string          `json:"etag"`
	ID         string          `json:"id"`
	Snippet    VideoSnippet    `json:"snippet"`
	Statistics VideoStatistics `json:"statistics"`
}

// VideoSnippet is a video's snippet part.
type VideoSnippet struct {
	PublishedAt  string `json:"publishedAt"`
	ChannelID    string `json:"channelId"`
	Title        string `json:"title"`
	ChannelTitle string `json:"channelTitle"`
	CategoryID   string `json:"categoryId"`
}

// VideoStatistics is a video's statistics part (counts as strings, as the
// API sends them).
type VideoStatistics struct {
	ViewCount    string `json:"viewCount"`
	LikeCount    string `json:"likeCount"`
	CommentCount string `json:"commentCount"`
}

// VideoListResponse is the body of videos.list.
type VideoListResponse struct {
	Kind          string   `json:"kind"`
	Etag          string   `json:"etag"`
	Items         []Video  `json:"items"`
	NextPageToken string   `json:"nextPageToken,omitempty"`
	PrevPageToken string   `json:"prevPageToken,omitempty"`
	PageInfo      PageInfo `json:"pageInfo"`
}

// PageInfo is a list response's paging summary.
type PageInfo struct {
	TotalResults   int `json:"totalResults"`
	ResultsPerPage int `json:"resultsPerPage"`
}

func hash(parts ...string) []byte {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return h[:]
}

// videoID returns a YouTube-like 11-character id.
func videoID(parts ...string) string {
	return base64.RawURLEncoding.EncodeToString(hash(parts...)[:8])[:11]
}

func etag(s string) string { return base64.RawURLEncoding.EncodeToString(hash("etag", s)[:20]) }

// video returns the deterministic video at rank i (0-based) of a list.
func video(id, list string, i int) Video {
	h := hash("video", id)
	n := binary.BigEndian.Uint64(h[:8])
	views := 1000 + n%5_000_000
	published := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Duration(n%(90*24)) * time.Hour)
	return Video{
		Kind: "youtube#video", Etag: etag(id), ID: id,
		Snippet: VideoSnippet{
			PublishedAt:  published.Format(time.RFC3339),
			ChannelID:    "UC" + videoID("channel", id) + videoID("channel2", id)[:11],
			Title:        fmt.Sprintf("%s #%d", list, i+1),
			ChannelTitle: "Channel " + videoID("channel", id)[:6],
			CategoryID:   strconv.Itoa(int(n%30) + 1),
		},
		Statistics: VideoStatistics{
			ViewCount:    strconv.FormatUint(views, 10),
			LikeCount:    strconv.FormatUint(views/40, 10),
			CommentCount: strconv.FormatUint(views/900, 10),
		},
	}
}

// pageToken encodes an offset into an opaque token bound to its list.
func pageToken(list string, offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%s|%d", list, offset)))
}

func parseToken(list, tok string) (int, bool) {
	if tok == "" {
		return 0, true
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, false
	}
	l, off, ok := strings.Cut(string(b), "|")
	n, err := strconv.Atoi(off)
	if !ok || l != list || err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// paging reads maxResults and pageToken for a list of total items.
func paging(w http.ResponseWriter, q map[string][]string, list string, total int) (offset, size int, ok bool) {
	size = 5
	if v := first(q, "maxResults"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 50 {
			writeError(w, http.StatusBadRequest, "Invalid value for maxResults: must be 0 to 50.", "youtube.parameter", "invalidParameter", "INVALID_ARGUMENT")
			return 0, 0, false
		}
		size = n
	}
	offset, ok = parseToken(list, first(q, "pageToken"))
	if !ok || offset > total {
		writeError(w, http.StatusBadRequest, "The request specifies an invalid page token.", "youtube.parameter", "invalidPageToken", "INVALID_ARGUMENT")
		return 0, 0, false
	}
	return offset, min(size, total-offset), true
}

func first(q map[string][]string, k string) string {
	if v := q[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (s *Server) videosList(w http.ResponseWriter, q map[string][]string) {
	resp := VideoListResponse{Kind: "youtube#videoListResponse", Items: []Video{}}
	switch {
	case first(q, "id") != "":
		ids := strings.Split(first(q, "id"), ",")
		for i, id := range ids {
			if id != "" && len(resp.Items) < 50 {
				resp.Items = append(resp.Items, video(id, "Video", i))
			}
		}
		resp.PageInfo = PageInfo{TotalResults: len(resp.Items), ResultsPerPage: len(resp.Items)}
	case first(q, "chart") == "mostPopular":
		region := strings.ToUpper(first(q, "regionCode"))
		if region == "" {
			region = "US"
		}
		if len(region) != 2 {
			writeError(w, http.StatusBadRequest, "The regionCode parameter specifies an invalid region code.", "youtube.parameter", "invalidRegionCode", "INVALID_ARGUMENT")
			return
		}
		list := "mostPopular/" + region
		offset, size, ok := paging(w, q, list, s.popular)
		if !ok {
			return
		}
		for i := offset; i < offset+size; i++ {
			resp.Items = append(resp.Items, video(videoID(list, strconv.Itoa(i)), "Trending in "+region, i))
		}
		if offset+size < s.popular && size > 0 {
			resp.NextPageToken = pageToken(list, offset+size)
		}
		if offset > 0 {
			resp.PrevPageToken = pageToken(list, max(offset-size, 0))
		}
		resp.PageInfo = PageInfo{TotalResults: s.popular, ResultsPerPage: size}
	default:
		writeError(w, http.StatusBadRequest, "No filter selected. Expected one of: myRating, id, chart, idParam", "youtube.parameter", "missingRequiredParameter", "INVALID_ARGUMENT")
		return
	}
	resp.Etag = etag(fmt.Sprint(len(resp.Items), resp.NextPageToken))
	writeJSON(w, http.StatusOK, resp)
}

// SearchResult is one item of search.list.
type SearchResult struct {
	Kind string `json:"kind"`
	Etag string `json:"etag"`
	ID   struct {
		Kind    string `json:"kind"`
		VideoID string `json:"videoId"`
	} `json:"id"`
	Snippet VideoSnippet `json:"snippet"`
}

// SearchListResponse is the body of search.list.
type SearchListResponse struct {
	Kind          string         `json:"kind"`
	Etag          string         `json:"etag"`
	NextPageToken string         `json:"nextPageToken,omitempty"`
	RegionCode    string         `json:"regionCode,omitempty"`
	PageInfo      PageInfo       `json:"pageInfo"`
	Items         []SearchResult `json:"items"`
}

func (s *Server) searchList(w http.ResponseWriter, q map[string][]string) {
	query := first(q, "q")
	region := strings.ToUpper(first(q, "regionCode"))
	list := "search/" + region + "/" + query
	offset, size, ok := paging(w, q, list, s.results)
	if !ok {
		return
	}
	resp := SearchListResponse{Kind: "youtube#searchListResponse", RegionCode: region, Items: []SearchResult{}}
	for i := offset; i < offset+size; i++ {
		v := video(videoID(list, strconv.Itoa(i)), "Result for "+strconv.Quote(query), i)
		var r SearchResult
		r.Kind, r.Etag = "youtube#searchResult", v.Etag
		r.ID.Kind, r.ID.VideoID = "youtube#video", v.ID
		r.Snippet = v.Snippet
		resp.Items = append(resp.Items, r)
	}
	if offset+size < s.results && size > 0 {
		resp.NextPageToken = pageToken(list, offset+size)
	}
	resp.PageInfo = PageInfo{TotalResults: s.results, ResultsPerPage: size}
	resp.Etag = etag(list + strconv.Itoa(offset))
	writeJSON(w, http.StatusOK, resp)
}
