// Package anthropicsim is a simulated Anthropic Messages API (POST
// /v1/messages) on loopback, for tests and examples, with Anthropic's rate
// limits per organization, its anthropic-ratelimit-* headers, its usage
// object, its streaming events and its 429 error body. Behaviour and its
// sources (read 2026-11-28 in the copies named in costs/profiles/anthropic.yaml;
// this machine reaches no upstream):
//
//   - Limits are requests (RPM), input tokens (ITPM) and output tokens
//     (OTPM) per minute, per organization, enforced with "the token bucket
//     algorithm" (https://docs.anthropic.com/en/api/rate-limits): each is a
//     bucket of its limit refilled at its limit per minute. A key belongs to
//     an organization (WithOrganization).
//   - ITPM counts input_tokens + cache_creation_input_tokens, not cache
//     reads; OTPM "is estimated based on max_tokens at the beginning of
//     each request and adjusted at the end of the request to reflect the
//     actual number of output tokens used".
//   - Every response carries anthropic-ratelimit-requests-{limit,remaining,
//     reset}, -input-tokens-*, -output-tokens-* and -tokens-* (the most
//     restrictive of input and output: the one with less remaining), resets
//     in RFC 3339: when the bucket is full again.
//   - Past a limit: 429 with retry-after (whole seconds, rounded up) and
//     {"type":"error","error":{"type":"rate_limit_error","message":...}};
//     nothing is billed.
//   - Usage: input_tokens, output_tokens, cache_creation_input_tokens,
//     cache_read_input_tokens (https://docs.anthropic.com/en/api/messages).
//   - Streaming (stream: true): events message_start (its message's usage
//     has the input tokens and output_tokens 1), content_block_start, ping,
//     content_block_delta per word, content_block_stop, message_delta (usage
//     with the cumulative output_tokens), message_stop
//     (https://docs.anthropic.com/en/docs/build-with-claude/streaming).
//
// Tokens are counted by simbucket.Tokens: a message 3 + its text's tokens,
// the system prompt its tokens, a request 3 more, tools their JSON's tokens
// plus 346 (a tool-use system prompt of the size Anthropic's table gives;
// not a published figure for every model). Prompt caching: the blocks up
// to the last one marked cache_control form a prefix; if it has 1,024
// tokens or more (Anthropic's minimum for Sonnet and Opus) and the
// organization wrote the same prefix in the last 5 minutes, it is read
// (cache_read_input_tokens), else written (cache_creation_input_tokens).
// The output is min(max_tokens, 1 + FNV-32a of the prompt's text mod 256).
package anthropicsim

import (
	"net/http/httptest"
	"sync"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/simbucket"
)

// Server is a simulated Anthropic Messages API. Safe for concurrent use.
type Server struct {
	ts             *httptest.Server
	clock          func() time.Time
	rpm, itpm, otp int64
	org            map[string]string
	overhead       int64
	prices         *costs.Prices

	mu       sync.Mutex
	limits   map[string]*limits
	billed   map[string]*costs.Usage
	dollars  map[string]int64
	cache    map[string]time.Time // org + prefix hash -> when written
	requests int64
	limited  int64
	seq      int64
}

type limits struct{ req, in, out *simbucket.Bucket }

// Option configures a Server.
type Option func(*Server)

// WithClock sets the server's clock. Default: time.Now.
func WithClock(clock func() time.Time) Option { return func(s *Server) { s.clock = clock } }

// WithLimits sets every organization's requests, input tokens and output
// tokens per minute. Default: 50, 30,000 and 8,000 (the anthropic
// profile's budgets).
func WithLimits(rpm, itpm, otpm int64) Option {
	return func(s *Server) { s.rpm, s.itpm, s.otp = rpm, itpm, otpm }
}

// WithOrganization makes keys belong to org: they share its limits and
// bill. Default: each key is an organization of its own.
func WithOrganization(org string, keys ...string) Option {
	return func(s *Server) {
		for _, k := range keys {
			s.org[k] = org
		}
	}
}

// WithPromptOverhead adds n hidden input tokens to every request.
func WithPromptOverhead(n int64) Option { return func(s *Server) { s.overhead = n } }

// WithPrices bills dollars at these prices. Default:
// costs.BuiltinPrices("anthropic").
func WithPrices(p *costs.Prices) Option { return func(s *Server) { s.prices = p } }

// New returns a Server listening on a loopback port. Close it when done.
func New(opts ...Option) *Server {
	s := NewHandler(opts...)
	s.ts = httptest.NewServer(s)
	return s
}

// NewHandler returns a Server that is not listening.
func NewHandler(opts ...Option) *Server {
	s := &Server{
		clock: time.Now, rpm: 50, itpm: 30000, otp: 8000,
		org: map[string]string{}, limits: map[string]*limits{}, billed: map[string]*costs.Usage{},
		dollars: map[string]int64{}, cache: map[string]time.Time{},
	}
	for _, o := range opts {
		o(s)
	}
	if s.prices == nil {
		p, err := costs.BuiltinPrices("anthropic")
		if err != nil {
			panic("anthropicsim: " + err.Error())
		}
		s.prices = p
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

// Organization returns the organization key belongs to.
func (s *Server) Organization(key string) string {
	if o, ok := s.org[key]; ok {
		return o
	}
	return key
}

// Billed returns the tokens billed to org so far.
func (s *Server) Billed(org string) costs.Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.billed[org]; u != nil {
		return *u
	}
	return costs.Usage{}
}

// Dollars returns what org was billed, in micro-dollars.
func (s *Server) Dollars(org string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dollars[org]
}

// Requests returns how many requests the server received.
func (s *Server) Requests() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// RateLimited returns how many 429s the server sent.
func (s *Server) RateLimited() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limited
}

func (s *Server) limitsOf(org string) *limits {
	l := s.limits[org]
	if l == nil {
		now := s.clock()
		l = &limits{
			req: simbucket.New(s.rpm, time.Minute, now),
			in:  simbucket.New(s.itpm, time.Minute, now),
			out: simbucket.New(s.otp, time.Minute, now),
		}
		s.limits[org] = l
	}
	return l
}
