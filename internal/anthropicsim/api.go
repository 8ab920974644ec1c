package anthropicsim

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/simbucket"
)

// cacheTTL is how long a cached prefix lives (Anthropic's default 5-minute
// cache, refreshed by each read).
const cacheTTL = 5 * time.Minute

// toolPrompt is the tool-use system prompt the simulator adds with tools.
const toolPrompt = 346

type call struct {
	model     string
	maxTokens int64
	stream    bool
	prompt    int64 // every input token
	prefix    int64 // tokens up to the last cache_control block
	prefixKey string
	text      string
}

func writeError(w http.ResponseWriter, status int, typ, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{ //nolint:errcheck // the client went away
		"type": "error", "error": map[string]string{"type": typ, "message": fmt.Sprintf(format, args...)},
	})
}

// ServeHTTP serves one API request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	s.mu.Unlock()
	key := r.Header.Get("x-api-key")
	if key == "" {
		writeError(w, 401, "authentication_error", "x-api-key header is required")
		return
	}
	if r.URL.Path != "/v1/messages" || r.Method != http.MethodPost {
		writeError(w, 404, "not_found_error", "Not found: %s %s", r.Method, r.URL.Path)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, costs.MaxBodyBytes+1))
	if err != nil || len(body) > costs.MaxBodyBytes {
		writeError(w, 413, "request_too_large", "Request exceeds the maximum allowed number of bytes.")
		return
	}
	c, msg := parseCall(body)
	if msg != "" {
		writeError(w, 400, "invalid_request_error", "%s", msg)
		return
	}
	c.prompt += s.overhead
	price, ok := s.prices.Lookup(c.model)
	if !ok {
		writeError(w, 404, "not_found_error", "model: %s", c.model)
		return
	}
	u, ok := s.admit(w, s.Organization(key), c, price)
	if !ok {
		return
	}
	if c.stream {
		s.stream(w, c, u)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(s.message(c, u, u.OutputTokens, true)) //nolint:errcheck // the client went away
}

func (s *Server) admit(w http.ResponseWriter, org string, c call, price costs.Price) (costs.Usage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	u := costs.Usage{Format: costs.AnthropicMessages, Model: c.model, InputTokens: c.prompt}
	ck := org + "\x00" + c.model + "\x00" + c.prefixKey
	if c.prefix >= 1024 {
		u.InputTokens -= c.prefix
		if at, ok := s.cache[ck]; ok && now.Sub(at) < cacheTTL {
			u.CachedInputTokens = c.prefix
		} else {
			u.CacheWriteTokens = c.prefix
		}
	}
	l := s.limitsOf(org)
	in := u.InputTokens + u.CacheWriteTokens
	var wait time.Duration
	what := ""
	switch {
	case !l.req.Take(now, 1):
		what, wait = "requests", l.req.Wait(now, 1)
	case in > l.in.Limit() || !l.in.Take(now, in):
		l.req.Give(now, 1)
		what, wait = "input tokens", l.in.Wait(now, min(in, l.in.Limit()))
	case c.maxTokens > l.out.Limit() || !l.out.Take(now, c.maxTokens):
		l.req.Give(now, 1)
		l.in.Give(now, in)
		what, wait = "output tokens", l.out.Wait(now, min(c.maxTokens, l.out.Limit()))
	}
	if what != "" {
		s.limited++
		s.headers(w, l, now)
		w.Header().Set("retry-after", strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10))
		writeError(w, 429, "rate_limit_error",
			"This request would exceed your organization's rate limit of %s per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.", what)
		return costs.Usage{}, false
	}
	if c.prefix >= 1024 {
		s.cache[ck] = now
	}
	u.OutputTokens = output(c)
	l.out.Give(now, c.maxTokens-u.OutputTokens) // OTPM is settled to the actual
	b := s.billed[org]
	if b == nil {
		b = &costs.Usage{Format: costs.AnthropicMessages}
		s.billed[org] = b
	}
	b.InputTokens += u.InputTokens
	b.CachedInputTokens += u.CachedInputTokens
	b.CacheWriteTokens += u.CacheWriteTokens
	b.OutputTokens += u.OutputTokens
	d, _ := price.Cost(u)
	s.dollars[org] += d
	s.seq++
	s.headers(w, l, now)
	return u, true
}

// output is min(max_tokens, 1 + FNV-32a of the prompt's text mod 256).
func output(c call) int64 {
	h := fnv.New32a()
	h.Write([]byte(c.text))
	return min(c.maxTokens, 1+int64(h.Sum32()%256))
}

func (s *Server) headers(w http.ResponseWriter, l *limits, now time.Time) {
	h := w.Header()
	set := func(name string, b *simbucket.Bucket) int64 {
		rem := b.Available(now)
		h.Set("anthropic-ratelimit-"+name+"-limit", strconv.FormatInt(b.Limit(), 10))
		h.Set("anthropic-ratelimit-"+name+"-remaining", strconv.FormatInt(rem, 10))
		h.Set("anthropic-ratelimit-"+name+"-reset", now.Add(b.UntilFull(now)).UTC().Format(time.RFC3339))
		return rem
	}
	set("requests", l.req)
	ri, ro := set("input-tokens", l.in), set("output-tokens", l.out)
	most := l.in
	if ro < ri {
		most = l.out
	}
	set("tokens", most)
}

func parseCall(body []byte) (call, string) {
	var req struct {
		Model     string          `json:"model"`
		MaxTokens *int64          `json:"max_tokens"`
		Messages  json.RawMessage `json:"messages"`
		System    json.RawMessage `json:"system"`
		Tools     json.RawMessage `json:"tools"`
		Stream    bool            `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return call{}, "invalid JSON body: " + err.Error()
	}
	switch {
	case req.Model == "":
		return call{}, "model: Field required"
	case req.MaxTokens == nil:
		return call{}, "max_tokens: Field required"
	case *req.MaxTokens < 1:
		return call{}, "max_tokens: must be at least 1"
	}
	c := call{model: req.Model, maxTokens: *req.MaxTokens, stream: req.Stream}
	var text strings.Builder
	h := fnv.New64a()
	add := func(n int64, s string, cached bool) {
		c.prompt += n
		text.WriteString(s)
		h.Write([]byte(s))
		if cached {
			c.prefix, c.prefixKey = c.prompt, fmt.Sprint(h.Sum64())
		}
	}
	if len(req.Tools) > 0 && string(req.Tools) != "null" {
		add(simbucket.Tokens(string(req.Tools))+toolPrompt, string(req.Tools), false)
	}
	if len(req.System) > 0 && string(req.System) != "null" {
		if msg := blocks(req.System, 0, add); msg != "" {
			return c, "system: " + msg
		}
	}
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(req.Messages, &msgs); err != nil || len(msgs) == 0 {
		return c, "messages: want a non-empty list of {role, content}"
	}
	for i, m := range msgs {
		if m.Role != "user" && m.Role != "assistant" {
			return c, fmt.Sprintf("messages.%d.role: want user or assistant", i)
		}
		if msg := blocks(m.Content, 3, add); msg != "" {
			return c, fmt.Sprintf("messages.%d.content: %s", i, msg)
		}
	}
	c.prompt += 3
	c.text = text.String()
	return c, ""
}

// blocks counts a string or a list of text blocks; overhead is added once.
func blocks(raw json.RawMessage, overhead int64, add func(int64, string, bool)) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		add(overhead+simbucket.Tokens(s), s, false)
		return ""
	}
	var bs []struct {
		Type         string          `json:"type"`
		Text         string          `json:"text"`
		CacheControl json.RawMessage `json:"cache_control"`
	}
	if err := json.Unmarshal(raw, &bs); err != nil {
		return "want a string or a list of content blocks"
	}
	add(overhead, "", false)
	for _, b := range bs {
		if b.Type != "text" {
			return fmt.Sprintf("the simulator serves text blocks only, not %q", b.Type)
		}
		add(simbucket.Tokens(b.Text), b.Text, len(b.CacheControl) > 0 && string(b.CacheControl) != "null")
	}
	return ""
}
