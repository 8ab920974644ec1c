package openaisim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/quotactl/quotactl/costs"
)

// chatUsage is the usage object of Chat Completions and Embeddings.
type chatUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	Details          struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func toChatUsage(u costs.Usage) chatUsage {
	cu := chatUsage{PromptTokens: u.PromptTokens(), CompletionTokens: u.OutputTokens}
	cu.TotalTokens = cu.PromptTokens + cu.CompletionTokens
	cu.Details.CachedTokens = u.CachedInputTokens
	return cu
}

// respUsage is the usage object of the Responses API.
type respUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	InputDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens  int64 `json:"output_tokens"`
	OutputDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// text is the completion text of choice i: one word per output token.
func text(c call, i int64) []string {
	n := completion(c, i)
	words := make([]string, n)
	for j := range words {
		words[j] = fmt.Sprintf("w%d ", j%10)
	}
	return words
}

func finish(c call, i int64) string {
	if completion(c, i) == c.ceiling {
		return "length"
	}
	return "stop"
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client went away
}

func (s *Server) id(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%s-%d", prefix, s.seq)
}

func (s *Server) writeChat(w http.ResponseWriter, c call, u costs.Usage) {
	choices := make([]map[string]any, c.n)
	for i := range c.n {
		choices[i] = map[string]any{
			"index":         i,
			"message":       map[string]any{"role": "assistant", "content": strings.Join(text(c, i), "")},
			"finish_reason": finish(c, i),
		}
	}
	writeJSON(w, map[string]any{
		"id": s.id("chatcmpl"), "object": "chat.completion", "created": s.clock().Unix(), "model": c.model,
		"choices": choices, "usage": toChatUsage(u),
	})
}

// sse writes server-sent events and flushes each.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

func (e *sse) send(event string, v any) {
	if event != "" {
		fmt.Fprintf(e.w, "event: %s\n", event)
	}
	if s, ok := v.(string); ok {
		fmt.Fprintf(e.w, "data: %s\n\n", s)
	} else {
		b, _ := json.Marshal(v)
		fmt.Fprintf(e.w, "data: %s\n\n", b)
	}
	if e.f != nil {
		e.f.Flush()
	}
}

// streamChat streams a chat completion: a role chunk, content chunks, a
// finish chunk per choice, the usage chunk (include_usage only), [DONE].
// With include_usage, every other chunk carries "usage": null, as OpenAI's
// do.
func (s *Server) streamChat(w http.ResponseWriter, c call, u costs.Usage) {
	e := newSSE(w)
	id, created := s.id("chatcmpl"), s.clock().Unix()
	chunk := func(choices []map[string]any, usage any) map[string]any {
		m := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": c.model, "choices": choices}
		if c.includeUsage {
			m["usage"] = usage
		}
		return m
	}
	for i := range c.n {
		e.send("", chunk([]map[string]any{{"index": i, "delta": map[string]any{"role": "assistant", "content": ""}, "finish_reason": nil}}, nil))
		for _, word := range text(c, i) {
			e.send("", chunk([]map[string]any{{"index": i, "delta": map[string]any{"content": word}, "finish_reason": nil}}, nil))
		}
		e.send("", chunk([]map[string]any{{"index": i, "delta": map[string]any{}, "finish_reason": finish(c, i)}}, nil))
	}
	if c.includeUsage {
		e.send("", chunk([]map[string]any{}, toChatUsage(u)))
	}
	e.send("", "[DONE]")
}

func (s *Server) response(c call, u *costs.Usage, id string) map[string]any {
	r := map[string]any{
		"id": id, "object": "response", "created_at": s.clock().Unix(), "model": c.model, "status": "in_progress",
		"output": []any{}, "usage": nil,
	}
	if u != nil {
		ru := respUsage{InputTokens: u.PromptTokens(), OutputTokens: u.OutputTokens}
		ru.InputDetails.CachedTokens = u.CachedInputTokens
		ru.TotalTokens = ru.InputTokens + ru.OutputTokens
		r["usage"] = ru
		r["status"] = "completed"
		if finish(c, 0) == "length" {
			r["status"] = "incomplete"
			r["incomplete_details"] = map[string]string{"reason": "max_output_tokens"}
		}
		r["output"] = []any{map[string]any{
			"type": "message", "id": "msg-" + id, "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": strings.Join(text(c, 0), ""), "annotations": []any{}}},
		}}
	}
	return r
}

func (s *Server) writeResponse(w http.ResponseWriter, c call, u costs.Usage) {
	writeJSON(w, s.response(c, &u, s.id("resp")))
}

// streamResponses streams a Responses API call: response.created,
// response.output_text.delta per word, response.output_text.done, then
// response.completed (or response.incomplete at the ceiling) with the
// usage.
func (s *Server) streamResponses(w http.ResponseWriter, c call, u costs.Usage) {
	e := newSSE(w)
	id := s.id("resp")
	seq := 0
	send := func(typ string, v map[string]any) {
		v["type"], v["sequence_number"] = typ, seq
		seq++
		e.send(typ, v)
	}
	send("response.created", map[string]any{"response": s.response(c, nil, id)})
	words := text(c, 0)
	for _, word := range words {
		send("response.output_text.delta", map[string]any{"item_id": "msg-" + id, "output_index": 0, "content_index": 0, "delta": word})
	}
	send("response.output_text.done", map[string]any{"item_id": "msg-" + id, "output_index": 0, "content_index": 0, "text": strings.Join(words, "")})
	final := s.response(c, &u, id)
	if final["status"] == "incomplete" {
		send("response.incomplete", map[string]any{"response": final})
		return
	}
	send("response.completed", map[string]any{"response": final})
}

func (s *Server) writeEmbeddings(w http.ResponseWriter, c call, u costs.Usage) {
	data := make([]map[string]any, c.n)
	for i := range data {
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": []float64{0.1, -0.2, 0.3, float64(i)}}
	}
	cu := toChatUsage(u)
	writeJSON(w, map[string]any{
		"object": "list", "data": data, "model": c.model,
		"usage": map[string]int64{"prompt_tokens": cu.PromptTokens, "total_tokens": cu.PromptTokens},
	})
}
