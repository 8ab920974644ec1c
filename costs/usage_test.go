package costs_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/anthropicsim"
	"github.com/quotactl/quotactl/internal/openaisim"
)

// The providers' documented response shapes.
const (
	openAIChatBody = `{"id":"chatcmpl-abc123","object":"chat.completion","created":1677858242,"model":"gpt-4o-mini",
"usage":{"prompt_tokens":13,"completion_tokens":7,"total_tokens":20,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":0}},
"choices":[{"message":{"role":"assistant","content":"\n\nThis is a test!"},"finish_reason":"stop","index":0}]}`
	openAIResponsesBody = `{"id":"resp_1","object":"response","model":"gpt-4.1","status":"completed","output":[],
"usage":{"input_tokens":36,"input_tokens_details":{"cached_tokens":0},"output_tokens":87,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":123}}`
	openAIEmbeddingsBody = `{"object":"list","data":[{"object":"embedding","embedding":[0.1],"index":0}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}`
	anthropicBody        = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[{"type":"text","text":"Hi"}],
"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":2095,"output_tokens":503,"cache_creation_input_tokens":2051,"cache_read_input_tokens":100}}`
	shopifyBody = `{"data":{"shop":{"name":"x"}},"extensions":{"cost":{"requestedQueryCost":12,"actualQueryCost":7,"throttleStatus":{"maximumAvailable":2000.0,"currentlyAvailable":1993.0,"restoreRate":100.0}}}}`
	throttled   = `{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED","documentation":"https://shopify.dev/api/usage/limits#rate-limits"}}],"extensions":{"cost":{"requestedQueryCost":252,"actualQueryCost":null,"throttleStatus":{"maximumAvailable":2000.0,"currentlyAvailable":100.0,"restoreRate":100.0}}}}`
)

func TestReadUsage(t *testing.T) {
	for _, c := range []struct {
		format costs.BodyFormat
		body   string
		want   costs.Usage
	}{
		{costs.OpenAIChat, openAIChatBody, costs.Usage{Model: "gpt-4o-mini", InputTokens: 9, CachedInputTokens: 4, OutputTokens: 7}},
		{costs.OpenAIResponses, openAIResponsesBody, costs.Usage{Model: "gpt-4.1", InputTokens: 36, OutputTokens: 87}},
		{costs.OpenAIEmbeddings, openAIEmbeddingsBody, costs.Usage{Model: "text-embedding-3-small", InputTokens: 8}},
		{costs.AnthropicMessages, anthropicBody, costs.Usage{Model: "claude-sonnet-4-20250514", InputTokens: 2095, CacheWriteTokens: 2051, CachedInputTokens: 100, OutputTokens: 503}},
		{costs.ShopifyGraphQL, shopifyBody, costs.Usage{RequestedQueryCost: 12, QueryCost: 7}},
		{costs.ShopifyGraphQL, throttled, costs.Usage{RequestedQueryCost: 252, Throttled: true}},
	} {
		u, err := costs.ReadUsage(c.format, []byte(c.body))
		c.want.Format = c.format
		u.Throttle = nil
		if err != nil || u != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.format, u, err, c.want)
		}
	}
	u, _ := costs.ReadUsage(costs.AnthropicMessages, []byte(anthropicBody))
	if u.LimitedInputTokens() != 2095+2051 || u.PromptTokens() != 2095+2051+100 {
		t.Errorf("anthropic limited %d prompt %d", u.LimitedInputTokens(), u.PromptTokens())
	}
	for _, bad := range []string{"", "{", `{"error":{"message":"x"}}`, `{"usage":null}`, `{"usage":{"total_tokens":3}}`} {
		if _, err := costs.ReadUsage(costs.OpenAIChat, []byte(bad)); !errors.Is(err, costs.ErrNoUsage) {
			t.Errorf("%q: %v, want ErrNoUsage", bad, err)
		}
	}
}

// stream runs a streamed request against a simulator and returns the raw
// body, its content type and the usage billed.
func stream(t *testing.T, h http.Handler, path, body string, format costs.BodyFormat) ([]byte, string) {
	t.Helper()
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer k")
	req.Header.Set("x-api-key", "k")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
	}
	return rec.Body.Bytes(), rec.Header().Get("Content-Type")
}

// A stream split at every byte boundary, and fed a byte at a time, yields
// the usage of the whole; a stream cut before its end is incomplete.
func TestUsageScannerSplits(t *testing.T) {
	oai, ant := openaisim.NewHandler(), anthropicsim.NewHandler()
	cases := []struct {
		name   string
		format costs.BodyFormat
		h      http.Handler
		path   string
		body   string
	}{
		{"chat", costs.OpenAIChat, oai, "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"split me"}],"max_tokens":6,"stream":true,"stream_options":{"include_usage":true}}`},
		{"responses", costs.OpenAIResponses, oai, "/v1/responses", `{"model":"gpt-4.1","input":"split me","max_output_tokens":40,"stream":true}`},
		{"anthropic", costs.AnthropicMessages, ant, "/v1/messages", `{"model":"claude-3-5-haiku","max_tokens":6,"messages":[{"role":"user","content":"split me"}],"stream":true}`},
		{"chat json", costs.OpenAIChat, oai, "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"whole"}],"max_tokens":6}`},
	}
	for _, c := range cases {
		raw, ct := stream(t, c.h, c.path, c.body, c.format)
		whole := costs.NewUsageScanner(c.format, ct)
		whole.Write(raw)
		want, err := whole.Usage()
		if err != nil || want.OutputTokens == 0 {
			t.Fatalf("%s: whole: %+v, %v", c.name, want, err)
		}
		for _, crlf := range []bool{false, true} {
			data := raw
			if crlf && strings.HasPrefix(ct, "text/event-stream") {
				data = []byte(strings.ReplaceAll(string(raw), "\n", "\r\n"))
			}
			for i := 0; i <= len(data); i++ {
				s := costs.NewUsageScanner(c.format, ct)
				s.Write(data[:i])
				s.Write(data[i:])
				if got, err := s.Usage(); err != nil || got != want {
					t.Fatalf("%s (crlf %v): split at %d: %+v, %v; want %+v", c.name, crlf, i, got, err, want)
				}
			}
			s := costs.NewUsageScanner(c.format, ct)
			for i := range data {
				s.Write(data[i : i+1])
			}
			if got, err := s.Usage(); err != nil || got != want {
				t.Fatalf("%s: byte at a time: %+v, %v", c.name, got, err)
			}
		}
		// Cut short: the usage is not final.
		if strings.HasPrefix(ct, "text/event-stream") {
			s := costs.NewUsageScanner(c.format, ct)
			s.Write(raw[:len(raw)/2])
			if _, err := s.Usage(); !errors.Is(err, costs.ErrIncomplete) {
				t.Errorf("%s: half a stream: %v, want ErrIncomplete", c.name, err)
			}
		}
	}
}

func TestUsageReaderOnClose(t *testing.T) {
	oai := openaisim.NewHandler()
	raw, ct := stream(t, oai, "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":50,"stream":true,"stream_options":{"include_usage":true}}`, costs.OpenAIChat)
	var got costs.Usage
	var gotErr error
	calls := 0
	r := costs.NewUsageReader(io.NopCloser(strings.NewReader(string(raw))), costs.OpenAIChat, ct, func(u costs.Usage, err error) { got, gotErr, calls = u, err, calls+1 })
	if _, err := io.Copy(io.Discard, r); err != nil {
		t.Fatal(err)
	}
	r.Close()
	r.Close()
	if b := oai.Billed("k"); calls != 1 || gotErr != nil || got.OutputTokens != b.OutputTokens || got.InputTokens != b.InputTokens {
		t.Fatalf("calls %d usage %+v err %v billed %+v", calls, got, gotErr, oai.Billed("k"))
	}
	// Abandoned half way: ErrIncomplete.
	r = costs.NewUsageReader(io.NopCloser(strings.NewReader(string(raw))), costs.OpenAIChat, ct, func(u costs.Usage, err error) { gotErr = err })
	io.ReadFull(r, make([]byte, len(raw)/2))
	r.Close()
	if !errors.Is(gotErr, costs.ErrIncomplete) {
		t.Fatalf("abandoned: %v", gotErr)
	}
	// A JSON body read whole by a decoder that stops at the brace is final.
	r = costs.NewUsageReader(io.NopCloser(strings.NewReader(openAIChatBody)), costs.OpenAIChat, "application/json", nil)
	io.ReadFull(r, make([]byte, len(openAIChatBody)))
	if u, err := r.Usage(); err != nil || u.OutputTokens != 7 {
		t.Fatalf("json: %+v %v", u, err)
	}
}

func FuzzUsageScanner(f *testing.F) {
	f.Add([]byte("data: {\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n"), uint16(5), uint8(0))
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":4,\"output_tokens\":1}}}\r\n\r\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\ndata: {\"type\":\"message_stop\"}\n\n"), uint16(40), uint8(3))
	f.Add([]byte(openAIResponsesBody), uint16(10), uint8(1))
	f.Add([]byte(throttled), uint16(10), uint8(4))
	formats := []costs.BodyFormat{costs.OpenAIChat, costs.OpenAIResponses, costs.OpenAIEmbeddings, costs.AnthropicMessages, costs.ShopifyGraphQL}
	f.Fuzz(func(t *testing.T, data []byte, split uint16, fi uint8) {
		format := formats[int(fi)%len(formats)]
		for _, ct := range []string{"text/event-stream", "application/json"} {
			whole := costs.NewUsageScanner(format, ct)
			whole.Write(data)
			u1, err1 := whole.Usage()
			i := int(split) % (len(data) + 1)
			parts := costs.NewUsageScanner(format, ct)
			parts.Write(data[:i])
			parts.Write(data[i:])
			u2, err2 := parts.Usage()
			if (u1.Throttle == nil) != (u2.Throttle == nil) || u1.Throttle != nil && *u1.Throttle != *u2.Throttle {
				t.Fatalf("%s %s: throttle status differs when split at %d", format, ct, i)
			}
			u1.Throttle, u2.Throttle = nil, nil
			if u1 != u2 || (err1 == nil) != (err2 == nil) {
				t.Fatalf("%s %s: whole %+v %v; split at %d %+v %v", format, ct, u1, err1, i, u2, err2)
			}
			if u1.InputTokens < 0 || u1.OutputTokens < 0 || u1.CachedInputTokens < 0 || u1.QueryCost < 0 {
				t.Fatalf("negative usage %+v", u1)
			}
		}
	})
}
