package openaisim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/openaisim"
)

// clock is a fake clock tests move by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newClock() *clock { return &clock{now: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)} }

func post(t *testing.T, h http.Handler, path, key, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

const chat = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello to the world"}],"max_tokens":20}`

var resetRe = regexp.MustCompile(`^(\d+m)?\d+(\.\d+)?(ms|s)$|^\d+m0s$|^0s$`)

func TestChatUsageAndHeaders(t *testing.T) {
	c := newClock()
	s := openaisim.NewHandler(openaisim.WithClock(c.Now), openaisim.WithLimits(60, 1000))
	rec := post(t, s, "/v1/chat/completions", "k1", chat)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	u, err := costs.ReadUsage(costs.OpenAIChat, rec.Body.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	// 3 + tokens("user")=1 + tokens("Say hello to the world")=4 words + 4 spaces... counted by the rule:
	// "Say"1 " "1 "hello"2 " "1 "to"1 " "1 "the"1 " "1 "world"2 = 11; total 3+1+11+3 = 18.
	if u.InputTokens != 18 || u.OutputTokens < 1 || u.OutputTokens > 20 || u.Model != "gpt-4o-mini" {
		t.Fatalf("usage %+v", u)
	}
	h := rec.Header()
	if h.Get("x-ratelimit-limit-requests") != "60" || h.Get("x-ratelimit-limit-tokens") != "1000" ||
		h.Get("x-ratelimit-remaining-requests") != "59" {
		t.Fatalf("headers %v", h)
	}
	// Settled: the tokens limit counts the prompt and the completion only.
	if got, want := h.Get("x-ratelimit-remaining-tokens"), 1000-18-u.OutputTokens; got != itoa(want) {
		t.Fatalf("remaining tokens %s, want %d", got, want)
	}
	// 1 request of 60 a minute refills in 1s; the tokens in used*60s/1000.
	if got := h.Get("x-ratelimit-reset-requests"); got != "1s" {
		t.Errorf("reset-requests %q, want 1s", got)
	}
	if got := h.Get("x-ratelimit-reset-tokens"); !resetRe.MatchString(got) {
		t.Errorf("reset-tokens %q: not a duration like 6m0s or 12ms", got)
	}
	if b := s.Billed("k1"); b.InputTokens != 18 || b.OutputTokens != u.OutputTokens {
		t.Errorf("billed %+v", b)
	}
	if d, want := s.Dollars("k1"), ceilDiv(18*150000+u.OutputTokens*600000, 1_000_000); d != want {
		t.Errorf("dollars %d, want %d", d, want)
	}
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestTokensLimit429(t *testing.T) {
	c := newClock()
	s := openaisim.NewHandler(openaisim.WithClock(c.Now), openaisim.WithLimits(100, 100), openaisim.WithProject("p", "k1", "k2"))
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":60}`
	if rec := post(t, s, "/v1/chat/completions", "k1", body); rec.Code != 200 {
		t.Fatalf("first: %d %s", rec.Code, rec.Body)
	}
	// k2 shares project p: 60 of the ceiling are counted at admission.
	rec := post(t, s, "/v1/chat/completions", "k2", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":80}`)
	if rec.Code != 429 {
		t.Fatalf("second: %d %s, want 429", rec.Code, rec.Body)
	}
	var e struct {
		Error struct {
			Type, Code, Message string
			Param               *string
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code != "rate_limit_exceeded" || e.Error.Type != "tokens" || !strings.Contains(e.Error.Message, "Please try again in") {
		t.Fatalf("429 body %s", rec.Body)
	}
	ra := rec.Header().Get("Retry-After")
	if ra == "" || ra == "0" {
		t.Fatalf("retry-after %q", ra)
	}
	// A request above the whole limit can never pass: no retry-after.
	rec = post(t, s, "/v1/chat/completions", "k1", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":95}`)
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "" || !strings.Contains(rec.Body.String(), "Request too large") {
		t.Fatalf("too large: %d %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if s.RateLimited() != 2 || s.Billed("p").InputTokens == 0 {
		t.Fatalf("limited %d billed %+v", s.RateLimited(), s.Billed("p"))
	}
	wait, _ := time.ParseDuration(ra + "s")
	c.Add(wait)
	if rec := post(t, s, "/v1/chat/completions", "k2", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":80}`); rec.Code != 200 {
		t.Fatalf("after retry-after: %d %s", rec.Code, rec.Body)
	}
}

func TestRequestsLimit(t *testing.T) {
	c := newClock()
	s := openaisim.NewHandler(openaisim.WithClock(c.Now), openaisim.WithLimits(2, 100000))
	for i := range 3 {
		rec := post(t, s, "/v1/chat/completions", "k", chat)
		if want := map[bool]int{true: 200, false: 429}[i < 2]; rec.Code != want {
			t.Fatalf("request %d: %d, want %d", i, rec.Code, want)
		}
		if i == 2 && (rec.Header().Get("Retry-After") != "30" || !strings.Contains(rec.Body.String(), `"type":"requests"`)) {
			t.Fatalf("429: retry-after %q body %s", rec.Header().Get("Retry-After"), rec.Body)
		}
	}
}

// events splits an SSE body into its data payloads.
func events(body string) []string {
	var out []string
	for _, ev := range strings.Split(strings.TrimSpace(body), "\n\n") {
		for _, line := range strings.Split(ev, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				out = append(out, d)
			}
		}
	}
	return out
}

func TestChatStreamIncludeUsage(t *testing.T) {
	for _, include := range []bool{false, true} {
		s := openaisim.NewHandler()
		body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"stream me"}],"max_tokens":7,"stream":true`
		if include {
			body += `,"stream_options":{"include_usage":true}`
		}
		rec := post(t, s, "/v1/chat/completions", "k", body+"}")
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Fatalf("content type %q", ct)
		}
		evs := events(rec.Body.String())
		if evs[len(evs)-1] != "[DONE]" {
			t.Fatalf("last event %q, want [DONE]", evs[len(evs)-1])
		}
		var usageChunks int
		for i, ev := range evs[:len(evs)-1] {
			var ch struct {
				Object  string
				Choices []json.RawMessage
				Usage   *json.RawMessage `json:"usage"`
			}
			if err := json.Unmarshal([]byte(ev), &ch); err != nil || ch.Object != "chat.completion.chunk" {
				t.Fatalf("chunk %d %q: %v", i, ev, err)
			}
			if ch.Usage != nil && string(*ch.Usage) != "null" {
				usageChunks++
				if i != len(evs)-2 || len(ch.Choices) != 0 {
					t.Fatalf("usage chunk %d of %d with %d choices: want the last, with none", i, len(evs)-1, len(ch.Choices))
				}
			}
			if include != strings.Contains(ev, `"usage"`) {
				t.Fatalf("include_usage %v: chunk %q", include, ev)
			}
		}
		if want := map[bool]int{true: 1}[include]; usageChunks != want {
			t.Fatalf("include_usage %v: %d usage chunks", include, usageChunks)
		}
		sc := costs.NewUsageScanner(costs.OpenAIChat, rec.Header().Get("Content-Type"))
		sc.Write(rec.Body.Bytes())
		u, err := sc.Usage()
		b := s.Billed("k")
		if include && (err != nil || u.InputTokens != b.InputTokens || u.OutputTokens != b.OutputTokens) {
			t.Fatalf("scanned %+v, %v; billed %+v", u, err, b)
		}
		if !include && err == nil {
			t.Fatalf("no include_usage: scanned %+v without error", u)
		}
	}
}

func TestResponsesAndEmbeddings(t *testing.T) {
	s := openaisim.NewHandler()
	rec := post(t, s, "/v1/responses", "k", `{"model":"gpt-4.1","input":"hello there","instructions":"be brief","max_output_tokens":9}`)
	u, err := costs.ReadUsage(costs.OpenAIResponses, rec.Body.Bytes())
	if rec.Code != 200 || err != nil || u.OutputTokens < 1 || u.OutputTokens > 9 {
		t.Fatalf("responses: %d %s %+v %v", rec.Code, rec.Body, u, err)
	}
	rec = post(t, s, "/v1/responses", "k", `{"model":"gpt-4.1","input":"hello there","max_output_tokens":9,"stream":true}`)
	evs := events(rec.Body.String())
	if !strings.Contains(evs[0], `"response.created"`) || !regexp.MustCompile(`"type":"response\.(completed|incomplete)"`).MatchString(evs[len(evs)-1]) {
		t.Fatalf("responses stream events: first %q last %q", evs[0], evs[len(evs)-1])
	}
	rec = post(t, s, "/v1/embeddings", "k", `{"model":"text-embedding-3-small","input":["abcd efgh","ijkl"]}`)
	u, err = costs.ReadUsage(costs.OpenAIEmbeddings, rec.Body.Bytes())
	// "abcd"1 " "1 "efgh"1 = 3, "ijkl" 1.
	if err != nil || u.InputTokens != 4 || u.OutputTokens != 0 {
		t.Fatalf("embeddings: %s %+v %v", rec.Body, u, err)
	}
}

func TestPromptCaching(t *testing.T) {
	s := openaisim.NewHandler(openaisim.WithLimits(100, 1_000_000))
	long := strings.Repeat("lorem ipsum dolor ", 200) // 200*(2+1+2+1+2+1) = 1800 tokens
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + long + `"}],"max_tokens":5}`
	first, _ := costs.ReadUsage(costs.OpenAIChat, post(t, s, "/v1/chat/completions", "k", body).Body.Bytes())
	second, _ := costs.ReadUsage(costs.OpenAIChat, post(t, s, "/v1/chat/completions", "k", body).Body.Bytes())
	if first.CachedInputTokens != 0 || second.CachedInputTokens == 0 || second.CachedInputTokens%128 != 0 ||
		second.PromptTokens() != first.PromptTokens() {
		t.Fatalf("first %+v second %+v", first, second)
	}
}

func TestBadRequests(t *testing.T) {
	s := openaisim.New()
	defer s.Close()
	for _, c := range []struct {
		path, key, body string
		status          int
	}{
		{"/v1/chat/completions", "", chat, 401},
		{"/v1/nope", "k", chat, 404},
		{"/v1/chat/completions", "k", `{`, 400},
		{"/v1/chat/completions", "k", `{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}`, 404},
		{"/v1/chat/completions", "k", `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400},
	} {
		req, _ := http.NewRequest("POST", s.URL()+c.path, strings.NewReader(c.body))
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(b), `"error"`) {
			t.Errorf("%s %q: %d %s, want %d", c.path, c.body, resp.StatusCode, b, c.status)
		}
	}
}
