package costs_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/anthropicsim"
	"github.com/quotactl/quotactl/internal/openaisim"
)

func TestEstimateTokens(t *testing.T) {
	msgs := `[{"role":"user","content":"hello"}]`
	for _, c := range []struct {
		format      costs.BodyFormat
		body        string
		input, outp int64
		stream      bool
		streamUsage bool
	}{
		{costs.OpenAIChat, `{"model":"m","messages":` + msgs + `,"max_tokens":10}`, int64(len(msgs)) + 4 + 16, 10, false, false},
		{costs.OpenAIChat, `{"model":"m","messages":` + msgs + `,"max_tokens":10,"max_completion_tokens":30,"n":3}`, int64(len(msgs)) + 4 + 16, 90, false, false},
		{costs.OpenAIChat, `{"model":"m","messages":` + msgs + `,"max_tokens":10,"stream":true}`, int64(len(msgs)) + 20, 10, true, false},
		{costs.OpenAIChat, `{"model":"m","messages":` + msgs + `,"max_tokens":10,"stream":true,"stream_options":{"include_usage":true}}`, int64(len(msgs)) + 20, 10, true, true},
		{costs.OpenAIChat, `{"model":"m","messages":` + msgs + `,"max_tokens":1,"tools":[{"type":"function","function":{"name":"f"}}]}`,
			int64(len(msgs)) + 20 + int64(len(`[{"type":"function","function":{"name":"f"}}]`)) + costs.ToolsOverhead, 1, false, false},
		{costs.OpenAIResponses, `{"model":"m","input":"hi","instructions":"be","max_output_tokens":7}`, 4 + 4 + 16, 7, false, false},
		{costs.OpenAIResponses, `{"model":"m","input":"hi","max_output_tokens":7,"stream":true}`, 4 + 16, 7, true, true},
		{costs.AnthropicMessages, `{"model":"m","system":"sys","messages":` + msgs + `,"max_tokens":5}`, int64(len(msgs)) + 4 + 5 + 16, 5, false, false},
		{costs.OpenAIEmbeddings, `{"model":"m","input":"abc"}`, 4, 0, false, false},
		{costs.OpenAIEmbeddings, `{"model":"m","input":["abc","de"]}`, 7, 0, false, false},
		{costs.OpenAIEmbeddings, `{"model":"m","input":[1,2,3]}`, 3, 0, false, false},
		{costs.OpenAIEmbeddings, `{"model":"m","input":[[1,2],[3]]}`, 3, 0, false, false},
	} {
		e, err := costs.EstimateTokens(c.format, []byte(c.body))
		if err != nil || e.Input != c.input || e.Output != c.outp || e.Stream != c.stream || e.StreamUsage != c.streamUsage || e.Model != "m" {
			t.Errorf("%s %s: %+v, %v; want input %d output %d", c.format, c.body, e, err, c.input, c.outp)
		}
	}
}

func TestEstimateTokensRefuses(t *testing.T) {
	for _, c := range []struct {
		format costs.BodyFormat
		body   string
		want   error
		says   string
	}{
		{costs.OpenAIChat, `{"model":"m","messages":[{"role":"user","content":"x"}]}`, costs.ErrUnbounded, "max_completion_tokens"},
		{costs.OpenAIChat, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x"}}]}],"max_tokens":1}`, costs.ErrUnbounded, `"image_url" part`},
		{costs.OpenAIChat, `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":1,"prediction":{"type":"content","content":"x"}}`, costs.ErrUnbounded, "prediction"},
		{costs.OpenAIChat, `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":1,"modalities":["text","audio"]}`, costs.ErrUnbounded, "audio"},
		{costs.OpenAIChat, `{"model":"m","messages":[],"max_tokens":1}`, costs.ErrBadBody, "empty"},
		{costs.OpenAIChat, `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":-1}`, costs.ErrBadBody, "max_tokens"},
		{costs.OpenAIChat, `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":1,"n":0}`, costs.ErrBadBody, "n 0"},
		{costs.OpenAIChat, `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":99999999999999}`, costs.ErrBadBody, "ceiling"},
		{costs.OpenAIChat, `[1]`, costs.ErrBadBody, "JSON object"},
		{costs.OpenAIChat, `{"model":7}`, costs.ErrBadBody, "model"},
		{costs.OpenAIResponses, `{"model":"m","input":"x","max_output_tokens":5,"previous_response_id":"r"}`, costs.ErrUnbounded, "previous_response_id"},
		{costs.OpenAIResponses, `{"model":"m","input":"x","max_output_tokens":5,"tools":[{"type":"web_search"}]}`, costs.ErrUnbounded, `"web_search" tool`},
		{costs.OpenAIResponses, `{"model":"m","input":"x"}`, costs.ErrUnbounded, "max_output_tokens"},
		{costs.OpenAIResponses, `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}],"max_output_tokens":5}`, costs.ErrUnbounded, "input_file"},
		{costs.AnthropicMessages, `{"model":"m","messages":[{"role":"user","content":"x"}]}`, costs.ErrBadBody, "max_tokens"},
		{costs.AnthropicMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"x"}}]}]}`, costs.ErrUnbounded, `"image" part`},
		{costs.AnthropicMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, costs.ErrUnbounded, "web_search_20250305"},
		{costs.AnthropicMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"mcp_servers":[{}]}`, costs.ErrUnbounded, "mcp_servers"},
		{costs.OpenAIEmbeddings, `{"model":"m","input":[{"a":1}]}`, costs.ErrBadBody, "input"},
		{costs.ShopifyGraphQL, `{"query":"{ shop { name } }"}`, costs.ErrBadBody, "not an LLM API"},
	} {
		_, err := costs.EstimateTokens(c.format, []byte(c.body))
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s %s: %v; want %v saying %q", c.format, c.body, err, c.want, c.says)
		}
	}
	big := make([]byte, costs.MaxBodyBytes+1)
	if _, err := costs.EstimateTokens(costs.OpenAIChat, big); !errors.Is(err, costs.ErrBodyTooLarge) {
		t.Errorf("a body of %d bytes: %v", len(big), err)
	}
}

// randText returns text mixing ASCII words, punctuation, whitespace, JSON
// specials, multi-byte characters and emoji: the inputs a tokenizer counts
// most tokens for.
func randText(r *rand.Rand) string {
	pieces := []string{"the", "quick", "Brown", "fox123", " ", "  ", "\n", "\t", ",", ".", "!?", `"`, `\`, "é", "ß", "日本語", "🙂", "👩‍💻", "\u0000", "\u2028", "<|endoftext|>", "a", "zzzzzzzzzzzzzzzzzz"}
	var b strings.Builder
	for range r.IntN(40) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

func randChat(r *rand.Rand, format costs.BodyFormat) map[string]any {
	var msgs []any
	for i := range 1 + r.IntN(6) {
		role := []string{"user", "assistant"}[i%2]
		if format == costs.OpenAIChat && r.IntN(4) == 0 {
			role = "system"
		}
		m := map[string]any{"role": role}
		if r.IntN(2) == 0 {
			m["content"] = randText(r)
		} else {
			var parts []any
			for range 1 + r.IntN(3) {
				parts = append(parts, map[string]any{"type": "text", "text": randText(r)})
			}
			m["content"] = parts
		}
		if format == costs.OpenAIChat && r.IntN(3) == 0 {
			m["name"] = "bob"
		}
		msgs = append(msgs, m)
	}
	body := map[string]any{"model": "gpt-4o-mini", "messages": msgs, "max_tokens": 1 + r.IntN(300)}
	if format == costs.AnthropicMessages {
		body["model"] = "claude-sonnet-4-20250514"
		if r.IntN(2) == 0 {
			body["system"] = randText(r)
		}
	}
	if r.IntN(3) == 0 {
		tool := map[string]any{"name": "lookup", "description": randText(r), "input_schema": map[string]any{"type": "object"}}
		if format == costs.OpenAIChat {
			tool = map[string]any{"type": "function", "function": map[string]any{"name": "lookup", "description": randText(r)}}
		}
		body["tools"] = []any{tool}
	}
	return body
}

// billed posts body to a simulator and returns the usage it billed.
func billed(t testing.TB, h http.Handler, path, key string, body []byte) costs.Usage {
	t.Helper()
	req := httptest.NewRequest("POST", path, strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("x-api-key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	format := costs.OpenAIChat
	if path == "/v1/messages" {
		format = costs.AnthropicMessages
	}
	u, err := costs.ReadUsage(format, rec.Body.Bytes())
	if err != nil {
		t.Fatalf("%s %s: %d %s: %v", path, body, rec.Code, rec.Body, err)
	}
	return u
}

// The bound never falls below what the simulators bill, over many random
// prompts: the prompt tokens, and the prompt plus the output.
func TestEstimateNeverBelowSimulator(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 1))
	oai := openaisim.NewHandler(openaisim.WithLimits(1_000_000, 1_000_000_000))
	ant := anthropicsim.NewHandler(anthropicsim.WithLimits(1_000_000, 1_000_000_000, 1_000_000_000))
	for i := range 2000 {
		format, h, path := costs.OpenAIChat, http.Handler(oai), "/v1/chat/completions"
		if i%2 == 1 {
			format, h, path = costs.AnthropicMessages, ant, "/v1/messages"
		}
		body, _ := json.Marshal(randChat(r, format))
		e, err := costs.EstimateTokens(format, body)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		u := billed(t, h, path, "k", body)
		if e.Input < u.PromptTokens() || e.Total() < u.PromptTokens()+u.OutputTokens || e.Output < u.OutputTokens {
			t.Fatalf("%s: estimate %+v below billed %+v", body, e, u)
		}
	}
}

func FuzzEstimateTokens(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		b, _ := json.Marshal(randChat(r, costs.OpenAIChat))
		f.Add(b, uint8(0))
		b, _ = json.Marshal(randChat(r, costs.AnthropicMessages))
		f.Add(b, uint8(3))
	}
	f.Add([]byte(`{"model":"m","input":"x","max_output_tokens":3}`), uint8(1))
	f.Add([]byte(`{"model":"m","input":[[1,2]]}`), uint8(2))
	oai := openaisim.NewHandler(openaisim.WithLimits(1<<40, 1<<40))
	ant := anthropicsim.NewHandler(anthropicsim.WithLimits(1<<40, 1<<40, 1<<40))
	formats := []costs.BodyFormat{costs.OpenAIChat, costs.OpenAIResponses, costs.OpenAIEmbeddings, costs.AnthropicMessages, costs.ShopifyGraphQL}
	f.Fuzz(func(t *testing.T, body []byte, fi uint8) {
		format := formats[int(fi)%len(formats)]
		e, err := costs.EstimateTokens(format, body)
		if err != nil {
			if !errors.Is(err, costs.ErrBadBody) && !errors.Is(err, costs.ErrUnbounded) {
				t.Fatalf("error %v wraps neither ErrBadBody nor ErrUnbounded", err)
			}
			return
		}
		if e.Input < 0 || e.Output < 0 || e.Input > int64(len(body))+costs.ToolsOverhead*2+costs.RequestOverhead+int64(len(body))*costs.MessageOverhead {
			t.Fatalf("estimate %+v", e)
		}
		// Where the simulator serves the body, it bills no more.
		var h http.Handler
		path := ""
		switch format {
		case costs.OpenAIChat:
			h, path = oai, "/v1/chat/completions"
		case costs.AnthropicMessages:
			h, path = ant, "/v1/messages"
		default:
			return
		}
		req := httptest.NewRequest("POST", path, strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer k")
		req.Header.Set("x-api-key", "k")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			return
		}
		u, err := costs.ReadUsage(format, rec.Body.Bytes())
		if err != nil {
			t.Fatalf("served body without usage: %v", err)
		}
		if e.Input < u.PromptTokens() || e.Output < u.OutputTokens {
			t.Fatalf("%q: estimate %+v below billed %+v", body, e, u)
		}
	})
}
