package openaisim

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

// call is one request as the server reads it.
type call struct {
	kind         string // chat, responses, embeddings
	model        string
	prompt       int64  // prompt tokens by the simulator's rule
	text         string // the prompt's text, for the completion's length
	ceiling      int64  // output ceiling per choice
	n            int64
	stream       bool
	includeUsage bool
}

type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func writeError(w http.ResponseWriter, status int, typ, code, format string, args ...any) {
	e := apiError{Message: fmt.Sprintf(format, args...), Type: typ}
	if code != "" {
		e.Code = &code
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": e}) //nolint:errcheck // the client went away
}

// ServeHTTP serves one API request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	s.mu.Unlock()
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || key == "" {
		writeError(w, 401, "invalid_request_error", "invalid_api_key", "You didn't provide an API key.")
		return
	}
	project := r.Header.Get("OpenAI-Project")
	if project == "" {
		project = s.Project(key)
	}
	kind := map[string]string{"/v1/chat/completions": "chat", "/v1/responses": "responses", "/v1/embeddings": "embeddings"}[r.URL.Path]
	if kind == "" || r.Method != http.MethodPost {
		writeError(w, 404, "invalid_request_error", "unknown_url", "Unknown request URL: %s %s.", r.Method, r.URL.Path)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, costs.MaxBodyBytes+1))
	if err != nil || len(body) > costs.MaxBodyBytes {
		writeError(w, 413, "invalid_request_error", "", "Request body too large or unreadable.")
		return
	}
	c, msg := parseCall(kind, body)
	if msg != "" {
		writeError(w, 400, "invalid_request_error", "", "%s", msg)
		return
	}
	c.prompt += s.overhead
	price, ok := s.prices.Lookup(c.model)
	if !ok {
		writeError(w, 404, "invalid_request_error", "model_not_found", "The model `%s` does not exist or you do not have access to it.", c.model)
		return
	}
	u, ok := s.admit(w, project, c, price)
	if !ok {
		return
	}
	switch {
	case c.kind == "embeddings":
		s.writeEmbeddings(w, c, u)
	case c.stream && c.kind == "chat":
		s.streamChat(w, c, u)
	case c.stream:
		s.streamResponses(w, c, u)
	case c.kind == "chat":
		s.writeChat(w, c, u)
	default:
		s.writeResponse(w, c, u)
	}
}

// admit checks the project's limits, refuses with 429 or bills the call;
// it reports whether the call is served.
func (s *Server) admit(w http.ResponseWriter, project string, c call, price costs.Price) (costs.Usage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	l := s.limitsOf(project)
	counted := c.prompt + c.ceiling*c.n
	var wait time.Duration
	typ := ""
	switch {
	case !l.req.Take(now, 1):
		typ, wait = "requests", l.req.Wait(now, 1)
	case counted > l.tok.Limit() || !l.tok.Take(now, counted):
		l.req.Give(now, 1)
		typ, wait = "tokens", l.tok.Wait(now, min(counted, l.tok.Limit()))
	}
	if typ != "" && counted > l.tok.Limit() {
		// It can never fit: no retry-after, as retrying cannot help.
		s.limited++
		s.headers(w, l, now)
		writeError(w, 429, "tokens", "rate_limit_exceeded",
			"Request too large for %s in project %s on tokens per min: Limit %d, Requested %d.", c.model, project, l.tok.Limit(), counted)
		return costs.Usage{}, false
	}
	if typ != "" {
		s.limited++
		s.headers(w, l, now)
		w.Header().Set("Retry-After", strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10))
		lim := l.req.Limit()
		if typ == "tokens" {
			lim = l.tok.Limit()
		}
		writeError(w, 429, typ, "rate_limit_exceeded",
			"Rate limit reached for %s in project %s on %s per min: Limit %d, Requested %d. Please try again in %s.",
			c.model, project, typ, lim, map[bool]int64{true: 1, false: counted}[typ == "requests"], fmtReset(wait))
		return costs.Usage{}, false
	}
	u := costs.Usage{Format: format(c.kind), Model: c.model, InputTokens: c.prompt}
	h := fnv.New64a()
	h.Write([]byte(project + "\x00" + c.model + "\x00" + c.text))
	if k := fmt.Sprint(h.Sum64()); c.prompt >= 1024 && c.kind != "embeddings" {
		if s.seen[k] {
			u.CachedInputTokens = c.prompt - c.prompt%128
			u.InputTokens -= u.CachedInputTokens
		}
		s.seen[k] = true
	}
	for i := range c.n {
		u.OutputTokens += completion(c, i)
	}
	if s.settle {
		l.tok.Give(now, counted-(c.prompt+u.OutputTokens))
	}
	b := s.billed[project]
	if b == nil {
		b = &costs.Usage{Format: u.Format}
		s.billed[project] = b
	}
	b.InputTokens += u.InputTokens
	b.CachedInputTokens += u.CachedInputTokens
	b.OutputTokens += u.OutputTokens
	d, _ := price.Cost(u) // prices and tokens are bounded: it fits
	s.dollars[project] += d
	s.headers(w, l, now)
	s.seq++
	return u, true
}

func format(kind string) costs.BodyFormat {
	switch kind {
	case "chat":
		return costs.OpenAIChat
	case "responses":
		return costs.OpenAIResponses
	}
	return costs.OpenAIEmbeddings
}

// completion is the output tokens of choice i: min(ceiling, 1 + FNV-32a
// of the prompt's text and i, mod 256).
func completion(c call, i int64) int64 {
	if c.kind == "embeddings" {
		return 0
	}
	h := fnv.New32a()
	fmt.Fprintf(h, "%s\x00%d", c.text, i)
	return min(c.ceiling, 1+int64(h.Sum32()%256))
}

// headers sets the x-ratelimit-* headers from the project's buckets.
func (s *Server) headers(w http.ResponseWriter, l *limits, now time.Time) {
	h := w.Header()
	h.Set("x-ratelimit-limit-requests", strconv.FormatInt(l.req.Limit(), 10))
	h.Set("x-ratelimit-limit-tokens", strconv.FormatInt(l.tok.Limit(), 10))
	h.Set("x-ratelimit-remaining-requests", strconv.FormatInt(l.req.Available(now), 10))
	h.Set("x-ratelimit-remaining-tokens", strconv.FormatInt(l.tok.Available(now), 10))
	h.Set("x-ratelimit-reset-requests", fmtReset(l.req.UntilFull(now)))
	h.Set("x-ratelimit-reset-tokens", fmtReset(l.tok.UntilFull(now)))
}

// fmtReset writes a duration as OpenAI's headers do: "1s", "6m0s", "12ms",
// rounded up to the millisecond.
func fmtReset(d time.Duration) string {
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	return d.String()
}

// parseCall reads a request body; msg says what is wrong with a bad one.
func parseCall(kind string, body []byte) (call, string) {
	var req struct {
		Model               string          `json:"model"`
		Messages            json.RawMessage `json:"messages"`
		Input               json.RawMessage `json:"input"`
		Instructions        string          `json:"instructions"`
		Tools               json.RawMessage `json:"tools"`
		MaxTokens           *int64          `json:"max_tokens"`
		MaxCompletionTokens *int64          `json:"max_completion_tokens"`
		MaxOutputTokens     *int64          `json:"max_output_tokens"`
		N                   *int64          `json:"n"`
		Stream              bool            `json:"stream"`
		StreamOptions       struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return call{}, "We could not parse the JSON body of your request: " + err.Error()
	}
	if req.Model == "" {
		return call{}, "you must provide a model parameter"
	}
	c := call{kind: kind, model: req.Model, n: 1, stream: req.Stream, includeUsage: req.StreamOptions.IncludeUsage}
	var msg string
	switch kind {
	case "embeddings":
		msg = c.embeddingInput(req.Input)
		return c, msg
	case "chat":
		if req.N != nil {
			c.n = *req.N
		}
		if c.n < 1 || c.n > 128 {
			return c, "n must be between 1 and 128"
		}
		switch {
		case req.MaxCompletionTokens != nil:
			c.ceiling = *req.MaxCompletionTokens
		case req.MaxTokens != nil:
			c.ceiling = *req.MaxTokens
		default:
			c.ceiling = 16384 // the simulator's models' output limit
		}
		msg = c.messages(req.Messages)
	case "responses":
		c.ceiling = 16384
		if req.MaxOutputTokens != nil {
			c.ceiling = *req.MaxOutputTokens
		}
		var s string
		if json.Unmarshal(req.Input, &s) == nil {
			c.prompt, c.text = 3+simbucket.Tokens("user")+simbucket.Tokens(s), s
		} else {
			msg = c.messages(req.Input)
		}
		if req.Instructions != "" {
			c.prompt += 3 + simbucket.Tokens("system") + simbucket.Tokens(req.Instructions)
			c.text = req.Instructions + "\n" + c.text
		}
	}
	if c.ceiling < 1 {
		return c, "the output ceiling must be at least 1"
	}
	if len(req.Tools) > 0 && string(req.Tools) != "null" {
		c.prompt += simbucket.Tokens(string(req.Tools))
	}
	c.prompt += 3 // every reply is primed
	return c, msg
}

// messages counts a list of messages: 3 + role + text (+ 1 + name) each.
func (c *call) messages(raw json.RawMessage) string {
	var msgs []struct {
		Role    string          `json:"role"`
		Name    string          `json:"name"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &msgs); err != nil || len(msgs) == 0 {
		return "messages must be a non-empty list of {role, content}"
	}
	var text strings.Builder
	for _, m := range msgs {
		c.prompt += 3 + simbucket.Tokens(m.Role)
		if m.Name != "" {
			c.prompt += 1 + simbucket.Tokens(m.Name)
		}
		var s string
		if json.Unmarshal(m.Content, &s) != nil {
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if err := json.Unmarshal(m.Content, &parts); err != nil {
				return "content must be a string or a list of parts"
			}
			for _, p := range parts {
				if p.Type != "text" && p.Type != "input_text" && p.Type != "output_text" {
					return fmt.Sprintf("the simulator serves text parts only, not %q", p.Type)
				}
				s += p.Text
			}
		}
		c.prompt += simbucket.Tokens(s)
		text.WriteString(m.Role + ": " + s + "\n")
	}
	c.text = text.String()
	return ""
}

func (c *call) embeddingInput(raw json.RawMessage) string {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		c.prompt, c.text, c.n = simbucket.Tokens(one), one, 1
		return ""
	}
	var many []json.RawMessage
	if err := json.Unmarshal(raw, &many); err != nil || len(many) == 0 {
		return "input must be a string or a non-empty list"
	}
	var ints []int64
	if json.Unmarshal(raw, &ints) == nil {
		c.prompt, c.n = int64(len(ints)), 1
		return ""
	}
	for _, it := range many {
		var s string
		var toks []int64
		switch {
		case json.Unmarshal(it, &s) == nil:
			c.prompt += simbucket.Tokens(s)
			c.text += s + "\n"
		case json.Unmarshal(it, &toks) == nil:
			c.prompt += int64(len(toks))
		default:
			return "input items must be strings or token arrays"
		}
	}
	c.n = int64(len(many))
	return ""
}
