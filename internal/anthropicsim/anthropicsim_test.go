package anthropicsim_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/anthropicsim"
)

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

func post(t *testing.T, h http.Handler, key, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("POST", "/v1/messages", strings.NewReader(body))
	req.Header.Set("x-api-key", key)
	req.Header.Set("anthropic-version", "2023-06-01")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

const msg = `{"model":"claude-sonnet-4-20250514","max_tokens":40,"system":"be terse","messages":[{"role":"user","content":"Hello, Claude"}]}`

func TestMessageUsageAndHeaders(t *testing.T) {
	c := &clock{now: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
	s := anthropicsim.NewHandler(anthropicsim.WithClock(c.Now), anthropicsim.WithLimits(50, 30000, 8000))
	rec := post(t, s, "key", msg)
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	u, err := costs.ReadUsage(costs.AnthropicMessages, rec.Body.Bytes())
	// system "be terse" = 1+1+2 = 4; message 3 + "Hello"2 ","1 " "1 "Claude"2 = 9; +3 = 16.
	if err != nil || u.InputTokens != 16 || u.OutputTokens < 1 || u.OutputTokens > 40 || u.Model != "claude-sonnet-4-20250514" {
		t.Fatalf("usage %+v, %v", u, err)
	}
	h := rec.Header()
	for _, name := range []string{"requests", "input-tokens", "output-tokens", "tokens"} {
		reset, err := time.Parse(time.RFC3339, h.Get("anthropic-ratelimit-"+name+"-reset"))
		if err != nil || h.Get("anthropic-ratelimit-"+name+"-limit") == "" || h.Get("anthropic-ratelimit-"+name+"-remaining") == "" {
			t.Fatalf("%s headers: %v (%v)", name, h, err)
		}
		if reset.Before(c.Now()) || reset.After(c.Now().Add(time.Minute)) {
			t.Errorf("%s reset %v: want within the next minute", name, reset)
		}
	}
	if h.Get("anthropic-ratelimit-requests-remaining") != "49" || h.Get("anthropic-ratelimit-input-tokens-remaining") != "29984" {
		t.Errorf("remaining: %v", h)
	}
	// OTPM was settled to the actual output.
	if got, want := h.Get("anthropic-ratelimit-output-tokens-remaining"), 8000-u.OutputTokens; got != itoa(want) {
		t.Errorf("output remaining %s, want %d", got, want)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func Test429RateLimitError(t *testing.T) {
	c := &clock{now: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
	s := anthropicsim.NewHandler(anthropicsim.WithClock(c.Now), anthropicsim.WithLimits(50, 30000, 60))
	if rec := post(t, s, "k", strings.Replace(msg, `"max_tokens":40`, `"max_tokens":50`, 1)); rec.Code != 200 {
		t.Fatal(rec.Code)
	}
	rec := post(t, s, "k", strings.Replace(msg, `"max_tokens":40`, `"max_tokens":59`, 1))
	var e struct {
		Type  string
		Error struct{ Type, Message string }
	}
	json.Unmarshal(rec.Body.Bytes(), &e)
	if rec.Code != 429 || e.Type != "error" || e.Error.Type != "rate_limit_error" || rec.Header().Get("retry-after") == "" {
		t.Fatalf("%d %s %v", rec.Code, rec.Body, rec.Header())
	}
	if s.RateLimited() != 1 {
		t.Fatal(s.RateLimited())
	}
	c.Add(time.Minute)
	if rec := post(t, s, "k", strings.Replace(msg, `"max_tokens":40`, `"max_tokens":59`, 1)); rec.Code != 200 {
		t.Fatalf("after a minute: %d", rec.Code)
	}
}

func TestStreamEvents(t *testing.T) {
	s := anthropicsim.NewHandler()
	rec := post(t, s, "k", strings.Replace(msg, `"max_tokens":40`, `"max_tokens":40,"stream":true`, 1))
	var names []string
	for _, ev := range strings.Split(strings.TrimSpace(rec.Body.String()), "\n\n") {
		name, _, _ := strings.Cut(strings.TrimPrefix(ev, "event: "), "\n")
		if len(names) == 0 || names[len(names)-1] != name {
			names = append(names, name)
		}
	}
	want := "message_start content_block_start ping content_block_delta content_block_stop message_delta message_stop"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	sc := costs.NewUsageScanner(costs.AnthropicMessages, rec.Header().Get("Content-Type"))
	sc.Write(rec.Body.Bytes())
	u, err := sc.Usage()
	if b := s.Billed("k"); err != nil || u.InputTokens != b.InputTokens || u.OutputTokens != b.OutputTokens {
		t.Fatalf("stream usage %+v %v, billed %+v", u, err, b)
	}
}

func TestPromptCache(t *testing.T) {
	s := anthropicsim.NewHandler(anthropicsim.WithLimits(50, 1_000_000, 8000))
	long := strings.Repeat("lorem ipsum ", 600) // 600*(2+1+2+1) = 3600 tokens
	body := `{"model":"claude-3-5-haiku-20241022","max_tokens":5,"system":[{"type":"text","text":"` + long + `","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"q"}]}`
	first, _ := costs.ReadUsage(costs.AnthropicMessages, post(t, s, "k", body).Body.Bytes())
	second, _ := costs.ReadUsage(costs.AnthropicMessages, post(t, s, "k", body).Body.Bytes())
	if first.CacheWriteTokens != 3600 || first.CachedInputTokens != 0 || second.CachedInputTokens != 3600 || second.CacheWriteTokens != 0 ||
		first.InputTokens != second.InputTokens {
		t.Fatalf("first %+v second %+v", first, second)
	}
	if got := s.Billed("k"); got.CacheWriteTokens != 3600 || got.CachedInputTokens != 3600 {
		t.Fatalf("billed %+v", got)
	}
}
