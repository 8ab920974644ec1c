package anthropicsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/quotactl/quotactl/costs"
)

type usage struct {
	InputTokens   int64 `json:"input_tokens"`
	CacheCreation int64 `json:"cache_creation_input_tokens"`
	CacheRead     int64 `json:"cache_read_input_tokens"`
	OutputTokens  int64 `json:"output_tokens"`
}

func words(c call) []string {
	out := make([]string, output(c))
	for i := range out {
		out[i] = fmt.Sprintf("w%d ", i%10)
	}
	return out
}

// message is the Message object; outputTokens is what its usage says
// (1 in a stream's message_start, as Anthropic's).
func (s *Server) message(c call, u costs.Usage, outputTokens int64, done bool) map[string]any {
	s.mu.Lock()
	id := fmt.Sprintf("msg_%d", s.seq)
	s.mu.Unlock()
	m := map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": c.model,
		"content":     []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": usage{InputTokens: u.InputTokens, CacheCreation: u.CacheWriteTokens, CacheRead: u.CachedInputTokens, OutputTokens: outputTokens},
	}
	if done {
		m["content"] = []any{map[string]any{"type": "text", "text": strings.Join(words(c), "")}}
		m["stop_reason"] = stopReason(c)
	}
	return m
}

func stopReason(c call) string {
	if output(c) == c.maxTokens {
		return "max_tokens"
	}
	return "end_turn"
}

// stream writes the Messages streaming events in Anthropic's order.
func (s *Server) stream(w http.ResponseWriter, c call, u costs.Usage) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	f, _ := w.(http.Flusher)
	send := func(typ string, v map[string]any) {
		v["type"] = typ
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		if f != nil {
			f.Flush()
		}
	}
	send("message_start", map[string]any{"message": s.message(c, u, 1, false)})
	send("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	send("ping", map[string]any{})
	for _, word := range words(c) {
		send("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": word}})
	}
	send("content_block_stop", map[string]any{"index": 0})
	send("message_delta", map[string]any{
		"delta": map[string]any{"stop_reason": stopReason(c), "stop_sequence": nil},
		"usage": map[string]int64{"output_tokens": u.OutputTokens},
	})
	send("message_stop", map[string]any{})
}
