// Package openaisim is a simulated OpenAI API on loopback, for tests and
// examples: Chat Completions (POST /v1/chat/completions, streaming
// included), Responses (POST /v1/responses) and Embeddings (POST
// /v1/embeddings), with OpenAI's rate limits per project, its rate-limit
// headers, its usage objects and its 429 error bodies. Behaviour and its
// sources (read 2026-11-28; this machine reaches no upstream, so the pages
// were read in the copies named):
//
//   - Limits are requests (RPM) and tokens (TPM) per minute, "defined at the
//     organization level and at the project level"
//     (https://platform.openai.com/docs/guides/rate-limits). A key belongs to
//     a project (WithProject, or the OpenAI-Project header); keys of one
//     project share its limits. The limiter refills continuously: each limit
//     is a bucket of RPM (TPM) refilled RPM (TPM) per minute, which is what
//     "the time until the rate limit resets to its initial state" in the
//     reset headers describes. The exact algorithm is not published.
//   - A request counts, against TPM, its prompt's tokens plus its output
//     ceiling, max_tokens (or max_completion_tokens, max_output_tokens) times
//     n (the rate-limits guide: "calculated as the maximum of max_tokens and
//     the estimated number of tokens based on the character count of your
//     request"; this simulator counts the sum, the stricter reading). When
//     the response is done the count is settled to the tokens really used
//     (OpenAI does not publish whether it does; Anthropic documents it for
//     output tokens; WithoutSettle keeps the whole count instead).
//   - Every response carries x-ratelimit-limit-requests, -limit-tokens,
//     -remaining-requests, -remaining-tokens, -reset-requests and
//     -reset-tokens; resets are Go-style durations ("1s", "6m0s", "12ms"),
//     the format of the guide's example and of live responses
//     (https://community.openai.com/t/how-to-get-rate-limit-reset-time-for-response-api/1268905).
//   - Past a limit: 429 with retry-after (whole seconds, rounded up) and
//     OpenAI's error body {"error": {"message", "type": "requests"|"tokens",
//     "param": null, "code": "rate_limit_exceeded"}}; nothing is billed.
//   - Usage: prompt_tokens, completion_tokens, total_tokens,
//     prompt_tokens_details.cached_tokens (Chat, Embeddings);
//     input_tokens, output_tokens, input_tokens_details.cached_tokens
//     (Responses) (https://platform.openai.com/docs/api-reference).
//   - Streaming (stream: true): server-sent events "data: {chunk}", ending
//     with "data: [DONE]"; a last chunk with usage and empty choices only
//     when stream_options.include_usage is true. Responses streams named
//     events ending in response.completed, which carries the usage.
//
// Tokens are counted by simbucket.Tokens, deterministically (the real
// tokenizers are not reproduced): a message counts 3 + its role's tokens +
// its text's tokens (+ 1 + the name's with a name), a request 3 more (the
// reply priming: the counting rule of OpenAI's cookbook,
// https://cookbook.openai.com/examples/how_to_count_tokens_with_tiktoken),
// tools their JSON's tokens. The completion is min(ceiling, 1 + FNV-32a of
// the prompt's text mod 256) tokens per choice. Prompt caching: a prompt of
// 1,024 tokens or more that the project sent before is cached in 128-token
// steps (OpenAI's documented minimum and increment,
// https://platform.openai.com/docs/guides/prompt-caching).
//
// The server counts what it bills per project (Billed), 429s (RateLimited)
// and requests (Requests), and bills dollars with a price table
// (WithPrices, Dollars), so a test can hold the meter against it.
package openaisim

import (
	"net/http/httptest"
	"sync"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/simbucket"
)

// Server is a simulated OpenAI API. It is an http.Handler; New also starts
// it on a loopback port. Safe for concurrent use.
type Server struct {
	ts       *httptest.Server
	clock    func() time.Time
	rpm, tpm int64
	project  map[string]string // key -> project
	overhead int64             // hidden prompt tokens added to every request
	settle   bool
	prices   *costs.Prices

	mu       sync.Mutex
	limits   map[string]*limits // per project
	billed   map[string]*costs.Usage
	dollars  map[string]int64
	seen     map[string]bool // project + prompt hash: cached prompts
	requests int64
	limited  int64
	seq      int64
}

type limits struct{ req, tok *simbucket.Bucket }

// Option configures a Server.
type Option func(*Server)

// WithClock sets the server's clock. Default: time.Now.
func WithClock(clock func() time.Time) Option { return func(s *Server) { s.clock = clock } }

// WithLimits sets every project's requests and tokens per minute (a usage
// tier's). Default: 500 and 30,000 (Tier 1 for gpt-4o, as the openai
// profile's budgets).
func WithLimits(rpm, tpm int64) Option { return func(s *Server) { s.rpm, s.tpm = rpm, tpm } }

// WithProject makes keys belong to project: they share its limits and its
// bill. Default: each key is a project of its own. A request's
// OpenAI-Project header names its project too.
func WithProject(project string, keys ...string) Option {
	return func(s *Server) {
		for _, k := range keys {
			s.project[k] = project
		}
	}
}

// WithPromptOverhead adds n hidden tokens to every request's prompt, as a
// provider's injected system prompt would: the prompt billed is then above
// what any bound read from the body can know, for tests of an actual above
// the estimate.
func WithPromptOverhead(n int64) Option { return func(s *Server) { s.overhead = n } }

// WithoutSettle makes the tokens limit keep what a request was counted at
// admission (prompt + ceiling) instead of settling it to the usage.
func WithoutSettle() Option { return func(s *Server) { s.settle = false } }

// WithPrices bills dollars at these prices (Dollars). Default:
// costs.BuiltinPrices("openai").
func WithPrices(p *costs.Prices) Option { return func(s *Server) { s.prices = p } }

// New returns a Server listening on a loopback port. Close it when done.
func New(opts ...Option) *Server {
	s := NewHandler(opts...)
	s.ts = httptest.NewServer(s)
	return s
}

// NewHandler returns a Server that is not listening: serve it yourself.
func NewHandler(opts ...Option) *Server {
	s := &Server{
		clock: time.Now, rpm: 500, tpm: 30000, settle: true,
		project: map[string]string{}, limits: map[string]*limits{},
		billed: map[string]*costs.Usage{}, dollars: map[string]int64{}, seen: map[string]bool{},
	}
	for _, o := range opts {
		o(s)
	}
	if s.prices == nil {
		p, err := costs.BuiltinPrices("openai")
		if err != nil {
			panic("openaisim: " + err.Error())
		}
		s.prices = p
	}
	return s
}

// URL returns the base URL, e.g. "http://127.0.0.1:39817" ("" from
// NewHandler).
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

// Project returns the project key belongs to.
func (s *Server) Project(key string) string {
	if p, ok := s.project[key]; ok {
		return p
	}
	return key
}

// Billed returns the tokens billed to project so far (input, cached
// input, output), summed over every served request.
func (s *Server) Billed(project string) costs.Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.billed[project]; u != nil {
		return *u
	}
	return costs.Usage{}
}

// Dollars returns what project was billed, in micro-dollars: each
// request's usage priced (rounded up) and summed.
func (s *Server) Dollars(project string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dollars[project]
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

// Remaining returns what project has left now in its requests and tokens
// limits.
func (s *Server) Remaining(project string) (requests, tokens int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.limitsOf(project)
	now := s.clock()
	return l.req.Available(now), l.tok.Available(now)
}

func (s *Server) limitsOf(project string) *limits {
	l := s.limits[project]
	if l == nil {
		now := s.clock()
		l = &limits{req: simbucket.New(s.rpm, time.Minute, now), tok: simbucket.New(s.tpm, time.Minute, now)}
		s.limits[project] = l
	}
	return l
}
