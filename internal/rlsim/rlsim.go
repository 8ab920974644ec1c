// Package rlsim is a simulated upstream that meters requests by policies
// and says so with the IETF RateLimit header fields
// (draft-ietf-httpapi-ratelimit-headers-11,
// https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/11/,
// read 2026-11-28), for tests of any client that reads them.
//
// Each Policy allows Quota requests per Window, per partition: one partition
// per API key (Authorization: Bearer, X-Api-Key or the key query
// parameter); requests without a key share one. Windows are fixed: a
// partition's window for a policy starts at its first request and lasts the
// policy's window. Every response carries
//
//	RateLimit-Policy: "burst";q=10;w=60;pk=:…:, "daily";q=1000;w=86400;pk=:…:
//	RateLimit: "burst";r=7;t=42;pk=:…:, "daily";r=997;t=86342;pk=:…:
//
// (draft §3 and §4: Lists of Items whose value is the policy name as a
// String, with q, w and pk on the policy and r, t and pk on the service
// limit; pk a Byte Sequence, here the first 12 bytes of SHA-256 of the key,
// never the key). A request a policy cannot pay is answered 429 with
// Retry-After (the seconds until the policy that refused it resets) and the
// draft's quota-exceeded problem type (§5.1) naming the violated policies;
// it is not counted. WithLegacyFields adds the older RateLimit-Limit,
// RateLimit-Remaining and RateLimit-Reset fields (draft-ietf-httpapi-
// ratelimit-headers-03 and earlier) for the tightest policy.
//
// It counts what it serves and refuses (Requests, Served, Refused) and what
// each partition used (Used); Spend charges a key's partition as an
// unmetered client sharing the key would.
package rlsim

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Policy is one quota policy the server enforces and advertises.
type Policy struct {
	// Name identifies the policy in the fields, e.g. "burst". Printable
	// ASCII.
	Name string
	// Quota is the requests allowed per window (q), > 0.
	Quota int64
	// Window is the window length (w), a whole number of seconds >= 1s.
	Window time.Duration
}

// Server is a simulated upstream sending IETF RateLimit fields. It is an
// http.Handler; New also starts it on a loopback port. Safe for concurrent
// use.
type Server struct {
	ts       *httptest.Server
	clock    func() time.Time
	policies []Policy
	legacy   bool

	mu       sync.Mutex
	windows  map[string][]window // partition -> per policy
	requests int64
	served   int64
	refused  int64
}

type window struct {
	end  time.Time
	used int64
}

// Option configures a Server.
type Option func(*Server)

// WithClock sets the server's clock. Default: time.Now.
func WithClock(clock func() time.Time) Option { return func(s *Server) { s.clock = clock } }

// WithLegacyFields also sends RateLimit-Limit, RateLimit-Remaining and
// RateLimit-Reset (seconds) for the policy with the least remaining.
func WithLegacyFields() Option { return func(s *Server) { s.legacy = true } }

// New returns a Server enforcing policies on a loopback port. Close it when
// done. A bad policy (empty or non-printable name, duplicate name, quota <=
// 0, window not a whole number of seconds >= 1) is an error naming it.
func New(policies []Policy, opts ...Option) (*Server, error) {
	s, err := NewHandler(policies, opts...)
	if err != nil {
		return nil, err
	}
	s.ts = httptest.NewServer(s)
	return s, nil
}

// NewHandler is New without listening: serve the Server yourself. URL
// returns "".
func NewHandler(policies []Policy, opts ...Option) (*Server, error) {
	if len(policies) == 0 {
		return nil, fmt.Errorf("rlsim: no policies")
	}
	seen := map[string]bool{}
	for i, p := range policies {
		switch {
		case p.Name == "" || strings.IndexFunc(p.Name, func(r rune) bool { return r < 0x20 || r > 0x7e }) >= 0:
			return nil, fmt.Errorf("rlsim: policy %d: name %q: want printable ASCII", i, p.Name)
		case seen[p.Name]:
			return nil, fmt.Errorf("rlsim: policy %d: duplicate name %q", i, p.Name)
		case p.Quota <= 0:
			return nil, fmt.Errorf("rlsim: policy %q: quota %d: must be > 0", p.Name, p.Quota)
		case p.Window < time.Second || p.Window%time.Second != 0:
			return nil, fmt.Errorf("rlsim: policy %q: window %v: want a whole number of seconds >= 1s", p.Name, p.Window)
		}
		seen[p.Name] = true
	}
	s := &Server{clock: time.Now, policies: append([]Policy(nil), policies...), windows: map[string][]window{}}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// URL returns the server's base URL ("" from NewHandler).
func (s *Server) URL() string {
	if s.ts == nil {
		return ""
	}
	return s.ts.URL
}

// Close shuts the server down.
func (s *Server) Close() {
	if s.ts != nil {
		s.ts.Close()
	}
}

// Key returns a request's API key: a bearer token, X-Api-Key, or the key
// query parameter; "" for none.
func Key(r *http.Request) string {
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return k
	}
	return r.URL.Query().Get("key")
}

// PartitionKey returns the pk the server sends for key: the first 12 bytes
// of its SHA-256, so the key itself never appears in a response.
func PartitionKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:12]
}

// ServeHTTP serves one request: 200 with a small JSON body when every
// policy can pay, else 429.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := Key(r)
	now := s.clock()
	s.mu.Lock()
	s.requests++
	wins := s.partition(key, now)
	var violated []string
	var wait time.Duration
	for i, p := range s.policies {
		if wins[i].used+1 > p.Quota {
			violated = append(violated, p.Name)
			wait = max(wait, wins[i].end.Sub(now))
		}
	}
	if violated == nil {
		for i := range wins {
			wins[i].used++
		}
		s.served++
	} else {
		s.refused++
	}
	s.writeFields(w.Header(), key, wins, now)
	s.mu.Unlock()

	if violated != nil {
		w.Header().Set("Retry-After", strconv.FormatInt(ceilSeconds(wait), 10))
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusTooManyRequests)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"type":              "https://iana.org/assignments/http-problem-types#quota-exceeded",
			"title":             "Request cannot be satisfied as assigned quota has been exceeded",
			"violated-policies": violated,
		})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"path": r.URL.Path})
}

// partition returns key's windows at now, opening those that ended.
func (s *Server) partition(key string, now time.Time) []window {
	wins := s.windows[key]
	if wins == nil {
		wins = make([]window, len(s.policies))
		s.windows[key] = wins
	}
	for i, p := range s.policies {
		if !now.Before(wins[i].end) {
			wins[i] = window{end: now.Add(p.Window)}
		}
	}
	return wins
}

func ceilSeconds(d time.Duration) int64 {
	return int64((max(d, 0) + time.Second - 1) / time.Second)
}

// writeFields sets RateLimit-Policy and RateLimit (and the legacy trio).
func (s *Server) writeFields(h http.Header, key string, wins []window, now time.Time) {
	pk := ";pk=:" + base64.StdEncoding.EncodeToString(PartitionKey(key)) + ":"
	var pol, lim []string
	tight := -1
	for i, p := range s.policies {
		name := sfString(p.Name)
		pol = append(pol, fmt.Sprintf("%s;q=%d;w=%d%s", name, p.Quota, int64(p.Window/time.Second), pk))
		lim = append(lim, fmt.Sprintf("%s;r=%d;t=%d%s", name, p.Quota-wins[i].used, ceilSeconds(wins[i].end.Sub(now)), pk))
		if tight < 0 || p.Quota-wins[i].used < s.policies[tight].Quota-wins[tight].used {
			tight = i
		}
	}
	h.Set("RateLimit-Policy", strings.Join(pol, ", "))
	h.Set("RateLimit", strings.Join(lim, ", "))
	if s.legacy {
		p := s.policies[tight]
		h.Set("RateLimit-Limit", strconv.FormatInt(p.Quota, 10))
		h.Set("RateLimit-Remaining", strconv.FormatInt(p.Quota-wins[tight].used, 10))
		h.Set("RateLimit-Reset", strconv.FormatInt(ceilSeconds(wins[tight].end.Sub(now)), 10))
	}
}

// sfString serializes an RFC 9651 String: quoted, with '\' and '"'
// escaped (names are printable ASCII, checked in New).
func sfString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// Used returns what key's partition used of the named policy in its current
// window.
func (s *Server) Used(key, policy string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	for i, p := range s.policies {
		if p.Name == policy {
			if wins := s.windows[key]; wins != nil && now.Before(wins[i].end) {
				return wins[i].used
			}
		}
	}
	return 0
}

// Spend counts n requests against every policy of key's partition, as an
// unmetered client sharing the key would, and reports whether all fit
// (false: nothing counted).
func (s *Server) Spend(key string, n int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	wins := s.partition(key, s.clock())
	for i, p := range s.policies {
		if n <= 0 || wins[i].used+n > p.Quota {
			return false
		}
	}
	for i := range wins {
		wins[i].used += n
	}
	return true
}

// Requests returns how many requests the server received.
func (s *Server) Requests() int64 { s.mu.Lock(); defer s.mu.Unlock(); return s.requests }

// Served returns how many requests the server served.
func (s *Server) Served() int64 { s.mu.Lock(); defer s.mu.Unlock(); return s.served }

// Refused returns how many requests the server refused with 429.
func (s *Server) Refused() int64 { s.mu.Lock(); defer s.mu.Unlock(); return s.refused }
