package costs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"slices"
	"sync"
)

// Usage is what an upstream response says a call really cost.
type Usage struct {
	// Format is the response's API.
	Format BodyFormat `json:"format"`
	// Model is the model the response names ("" when it names none).
	Model string `json:"model,omitempty"`
	// InputTokens are the prompt tokens billed at the input price: for
	// OpenAI, prompt_tokens (input_tokens) less the cached ones; for
	// Anthropic, input_tokens (which excludes cache reads and writes).
	InputTokens int64 `json:"input_tokens"`
	// CachedInputTokens are prompt tokens read from the provider's cache,
	// billed at the cached-input price: OpenAI's
	// prompt_tokens_details.cached_tokens (input_tokens_details for
	// Responses), Anthropic's cache_read_input_tokens.
	CachedInputTokens int64 `json:"cached_input_tokens,omitempty"`
	// CacheWriteTokens are prompt tokens written to Anthropic's cache
	// (cache_creation_input_tokens), billed at the cache-write price.
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	// OutputTokens are the output tokens billed (completion_tokens,
	// output_tokens; reasoning tokens included).
	OutputTokens int64 `json:"output_tokens"`
	// RequestedQueryCost and QueryCost are a GraphQL call's calculated
	// cost before and after it ran (Shopify's requestedQueryCost and
	// actualQueryCost).
	RequestedQueryCost int64 `json:"requested_query_cost,omitempty"`
	QueryCost          int64 `json:"query_cost,omitempty"`
	// Throttled reports a GraphQL response refused for its cost (Shopify's
	// THROTTLED error, sent with HTTP 200): nothing ran, QueryCost is 0.
	Throttled bool `json:"throttled,omitempty"`
	// Throttle is the upstream's bucket as the response reports it
	// (Shopify's throttleStatus), when it does.
	Throttle *ThrottleStatus `json:"throttle,omitempty"`
}

// ThrottleStatus is Shopify's extensions.cost.throttleStatus: the app's
// bucket on the shop.
type ThrottleStatus struct {
	MaximumAvailable   float64 `json:"maximumAvailable"`
	CurrentlyAvailable float64 `json:"currentlyAvailable"`
	RestoreRate        float64 `json:"restoreRate"`
}

// PromptTokens is every prompt token, cached or not.
func (u Usage) PromptTokens() int64 { return u.InputTokens + u.CachedInputTokens + u.CacheWriteTokens }

// LimitedInputTokens are the prompt tokens the provider's input rate limit
// counts: every prompt token for OpenAI's tokens-per-minute; for
// Anthropic's input-tokens-per-minute, input and cache-write tokens but not
// cache reads ("cache_read_input_tokens [do] not count towards ITPM" for
// current models: https://docs.anthropic.com/en/api/rate-limits, read
// 2026-11-28).
func (u Usage) LimitedInputTokens() int64 {
	if u.Format == AnthropicMessages {
		return u.InputTokens + u.CacheWriteTokens
	}
	return u.PromptTokens()
}

// ErrNoUsage is returned when a response carries no usage: a streamed
// Chat Completion without stream_options.include_usage, an error body, a
// body of another API.
var ErrNoUsage = errors.New("costs: the response carries no usage")

// ErrIncomplete is returned for a response body not read to its end: the
// usage it reports, if any, is not final.
var ErrIncomplete = errors.New("costs: the response body was not read to its end")

// MaxUsageBody bounds the bytes a UsageScanner buffers: one JSON response
// body, or one server-sent event. Past it the scanner stops and reports an
// error; the body itself still reaches the caller whole.
const MaxUsageBody = 64 << 20

// ReadUsage reads the usage of a complete JSON response body of the given
// format. A body with no usage is an error wrapping ErrNoUsage.
func ReadUsage(format BodyFormat, body []byte) (Usage, error) {
	u := Usage{Format: format}
	if !slices.Contains(BodyFormats, format) {
		return u, fmt.Errorf("%w: unknown format %q (known: %s)", ErrBadBody, format, formatList())
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return u, fmt.Errorf("%w: %s: the body is not a JSON object", ErrNoUsage, format)
	}
	var found bool
	switch format {
	case ShopifyGraphQL:
		found = u.shopify(doc)
	case OpenAIResponses:
		if r, ok := doc["response"]; ok && !isNull(r) { // a response.* event's payload
			json.Unmarshal(r, &doc) //nolint:errcheck // a bad payload has no usage
		}
		found = u.openAI(doc)
	case AnthropicMessages:
		if m, ok := doc["message"]; ok && !isNull(m) { // a message_start event's payload
			json.Unmarshal(m, &doc) //nolint:errcheck
		}
		found = u.anthropic(doc)
	default:
		found = u.openAI(doc)
	}
	if !found {
		return u, fmt.Errorf("%w: %s", ErrNoUsage, format)
	}
	return u, nil
}

// openAI reads an OpenAI usage object: Chat Completions and Embeddings
// (prompt_tokens, completion_tokens, prompt_tokens_details.cached_tokens)
// or Responses (input_tokens, output_tokens,
// input_tokens_details.cached_tokens).
func (u *Usage) openAI(doc map[string]json.RawMessage) bool {
	if m, ok := doc["model"]; ok {
		json.Unmarshal(m, &u.Model) //nolint:errcheck // a model that is no string is left out
	}
	raw, ok := doc["usage"]
	if !ok || isNull(raw) {
		return false
	}
	var o struct {
		PromptTokens     *int64 `json:"prompt_tokens"`
		CompletionTokens int64  `json:"completion_tokens"`
		InputTokens      *int64 `json:"input_tokens"`
		OutputTokens     int64  `json:"output_tokens"`
		PromptDetails    struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		InputDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
	}
	if json.Unmarshal(raw, &o) != nil {
		return false
	}
	switch {
	case o.PromptTokens != nil:
		u.InputTokens, u.OutputTokens, u.CachedInputTokens = *o.PromptTokens, o.CompletionTokens, o.PromptDetails.CachedTokens
	case o.InputTokens != nil:
		u.InputTokens, u.OutputTokens, u.CachedInputTokens = *o.InputTokens, o.OutputTokens, o.InputDetails.CachedTokens
	default:
		return false
	}
	u.CachedInputTokens = clamp(u.CachedInputTokens, 0, u.InputTokens)
	u.InputTokens -= u.CachedInputTokens
	u.InputTokens, u.OutputTokens = max(u.InputTokens, 0), max(u.OutputTokens, 0)
	return true
}

// anthropicUsage is Anthropic's usage object; message_delta events carry
// some of its fields, cumulative.
type anthropicUsage struct {
	InputTokens   *int64 `json:"input_tokens"`
	OutputTokens  *int64 `json:"output_tokens"`
	CacheRead     *int64 `json:"cache_read_input_tokens"`
	CacheCreation *int64 `json:"cache_creation_input_tokens"`
}

// merge sets the fields a has; it reports whether it had any.
func (u *Usage) merge(a anthropicUsage) bool {
	set := func(dst *int64, v *int64) bool {
		if v == nil {
			return false
		}
		*dst = max(*v, 0)
		return true
	}
	had := set(&u.InputTokens, a.InputTokens)
	had = set(&u.OutputTokens, a.OutputTokens) || had
	had = set(&u.CachedInputTokens, a.CacheRead) || had
	return set(&u.CacheWriteTokens, a.CacheCreation) || had
}

func (u *Usage) anthropic(doc map[string]json.RawMessage) bool {
	if m, ok := doc["model"]; ok {
		json.Unmarshal(m, &u.Model) //nolint:errcheck
	}
	var a anthropicUsage
	if raw, ok := doc["usage"]; !ok || json.Unmarshal(raw, &a) != nil {
		return false
	}
	return u.merge(a) && a.InputTokens != nil
}

// shopify reads extensions.cost and a THROTTLED error.
func (u *Usage) shopify(doc map[string]json.RawMessage) bool {
	var ext struct {
		Cost *struct {
			Requested *float64        `json:"requestedQueryCost"`
			Actual    *float64        `json:"actualQueryCost"`
			Throttle  *ThrottleStatus `json:"throttleStatus"`
		} `json:"cost"`
	}
	if raw, ok := doc["extensions"]; !ok || json.Unmarshal(raw, &ext) != nil || ext.Cost == nil {
		return false
	}
	var errs []struct {
		Extensions struct {
			Code string `json:"code"`
		} `json:"extensions"`
	}
	if raw, ok := doc["errors"]; ok {
		json.Unmarshal(raw, &errs) //nolint:errcheck // errors of another shape throttle nothing
	}
	for _, e := range errs {
		u.Throttled = u.Throttled || e.Extensions.Code == "THROTTLED"
	}
	c := ext.Cost
	u.Throttle = c.Throttle
	if c.Requested != nil {
		u.RequestedQueryCost = ceilCost(*c.Requested)
	}
	if c.Actual != nil {
		u.QueryCost = ceilCost(*c.Actual)
	}
	return c.Actual != nil || u.Throttled
}

// ceilCost rounds a cost up to a whole unit, within [0, 1<<40].
func ceilCost(f float64) int64 {
	if !(f > 0) { // also NaN
		return 0
	}
	if f > 1<<40 {
		return 1 << 40
	}
	n := int64(f)
	if float64(n) < f {
		n++
	}
	return n
}

func clamp(v, lo, hi int64) int64 { return min(max(v, lo), hi) }

// UsageScanner finds the usage in a response body fed to it in pieces, as
// it streams by: in server-sent events (OpenAI's final include_usage chunk
// or response.completed event, Anthropic's message_start and message_delta
// events), or at the end of a JSON body. It is an io.Writer: tee the body
// into it. Write never fails: a body it cannot read is reported by Usage.
type UsageScanner struct {
	format BodyFormat
	sse    bool

	buf      []byte // JSON: the body; SSE: the current line
	data     []byte // SSE: the current event's data
	lastCR   bool   // SSE: the previous byte was '\r' (a "\r\n" pair)
	usage    Usage
	found    bool
	final    bool // the stream's terminal event (or the JSON body) was seen
	overflow bool
	err      error // set on overflow or a malformed body
}

// NewUsageScanner returns a scanner for a response body of format with the
// given Content-Type: server-sent events for text/event-stream, JSON
// otherwise.
func NewUsageScanner(format BodyFormat, contentType string) *UsageScanner {
	mt, _, _ := mime.ParseMediaType(contentType)
	return &UsageScanner{format: format, sse: mt == "text/event-stream"}
}

// Write feeds the next piece of the body. It always returns len(p), nil.
func (s *UsageScanner) Write(p []byte) (int, error) {
	if s.overflow {
		return len(p), nil
	}
	if !s.sse {
		if len(s.buf)+len(p) > MaxUsageBody {
			s.stop(fmt.Errorf("costs: %s response body larger than %d bytes: its usage is not read", s.format, MaxUsageBody))
			return len(p), nil
		}
		s.buf = append(s.buf, p...)
		return len(p), nil
	}
	for _, c := range p {
		switch {
		case c == '\n' && s.lastCR:
			s.lastCR = false // the '\n' of "\r\n" ends nothing more
		case c == '\n' || c == '\r':
			s.lastCR = c == '\r'
			s.line()
		default:
			s.lastCR = false
			if len(s.buf)+len(s.data) >= MaxUsageBody {
				s.stop(fmt.Errorf("costs: %s server-sent event larger than %d bytes: its usage is not read", s.format, MaxUsageBody))
				return len(p), nil
			}
			s.buf = append(s.buf, c)
		}
	}
	return len(p), nil
}

func (s *UsageScanner) stop(err error) {
	s.overflow, s.err = true, err
	s.buf, s.data = nil, nil
}

// line handles one complete SSE line (in s.buf).
func (s *UsageScanner) line() {
	line := s.buf
	s.buf = s.buf[:0]
	if len(line) == 0 { // a blank line dispatches the event
		if len(s.data) > 0 {
			s.event(s.data[:len(s.data)-1]) // drop the last '\n'
			s.data = s.data[:0]
		}
		return
	}
	field, value, _ := bytes.Cut(line, []byte(":"))
	if string(field) != "data" {
		return // event names, ids, comments: the data says what it is
	}
	value = bytes.TrimPrefix(value, []byte(" "))
	s.data = append(s.data, value...)
	s.data = append(s.data, '\n')
}

// event reads one event's data.
func (s *UsageScanner) event(data []byte) {
	if string(data) == "[DONE]" {
		s.final = true
		return
	}
	var head struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(data, &head) != nil {
		return
	}
	switch s.format {
	case AnthropicMessages:
		s.anthropicEvent(head.Type, data)
	case OpenAIResponses:
		switch head.Type {
		case "response.completed", "response.incomplete", "response.failed":
			s.final = true
			if u, err := ReadUsage(s.format, data); err == nil {
				s.usage, s.found = u, true
			}
		}
	default:
		if u, err := ReadUsage(s.format, data); err == nil {
			s.usage, s.found = u, true
		}
	}
}

func (s *UsageScanner) anthropicEvent(typ string, data []byte) {
	var ev struct {
		Message *struct {
			Model string         `json:"model"`
			Usage anthropicUsage `json:"usage"`
		} `json:"message"`
		Usage *anthropicUsage `json:"usage"`
	}
	switch typ {
	case "message_start":
		if json.Unmarshal(data, &ev) == nil && ev.Message != nil && ev.Message.Usage.InputTokens != nil {
			s.usage = Usage{Format: s.format, Model: ev.Message.Model}
			s.usage.merge(ev.Message.Usage)
			s.found = true
		}
	case "message_delta":
		if s.found && json.Unmarshal(data, &ev) == nil && ev.Usage != nil {
			s.usage.merge(*ev.Usage)
		}
	case "message_stop":
		s.final = true
	}
}

// Usage returns what the body said so far. err is nil once the usage is
// final: the JSON body parsed, or the stream's terminal event came
// (OpenAI's [DONE] or response.completed, Anthropic's message_stop). It
// wraps ErrIncomplete for a stream that stopped before (u holds what was
// seen: Anthropic's input tokens, the output so far), ErrNoUsage for a body
// that carries none.
func (s *UsageScanner) Usage() (u Usage, err error) {
	if s.err != nil {
		return Usage{Format: s.format}, s.err
	}
	if !s.sse {
		return ReadUsage(s.format, s.buf)
	}
	switch {
	case s.final && s.found:
		return s.usage, nil
	case s.final:
		return Usage{Format: s.format}, fmt.Errorf("%w: %s stream (for OpenAI Chat Completions, set stream_options.include_usage)", ErrNoUsage, s.format)
	case s.found:
		return s.usage, fmt.Errorf("%w: %s stream stopped before its last event", ErrIncomplete, s.format)
	}
	return Usage{Format: s.format}, fmt.Errorf("%w: %s stream stopped before its usage", ErrIncomplete, s.format)
}

// UsageReader wraps a response body: the caller reads the body as it
// would, and the reader's scanner finds the usage as it goes by. On Close
// it calls its onClose function once with the usage (see
// UsageScanner.Usage); a body closed before its end gives ErrIncomplete.
type UsageReader struct {
	rc      io.ReadCloser
	scan    *UsageScanner
	eof     bool
	once    sync.Once
	onClose func(Usage, error)
}

// NewUsageReader wraps body, a response body of format with the given
// Content-Type. onClose, when not nil, is called once, on the first Close.
func NewUsageReader(body io.ReadCloser, format BodyFormat, contentType string, onClose func(Usage, error)) *UsageReader {
	return &UsageReader{rc: body, scan: NewUsageScanner(format, contentType), onClose: onClose}
}

// Read reads from the body and feeds what it read to the scanner.
func (r *UsageReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.scan.Write(p[:n]) //nolint:errcheck // never fails
	if err == io.EOF {
		r.eof = true
	}
	return n, err
}

// Usage returns the usage found so far (see UsageScanner.Usage); before
// the end of a JSON body it wraps ErrIncomplete.
func (r *UsageReader) Usage() (Usage, error) {
	u, err := r.scan.Usage()
	if !r.eof && !r.scan.sse && err != nil {
		// A JSON body not read to EOF may still be whole (a decoder stops
		// at the closing brace); if it did not parse, it was cut short.
		return u, fmt.Errorf("%w: %v", ErrIncomplete, err)
	}
	return u, err
}

// Close closes the body and reports the usage to onClose.
func (r *UsageReader) Close() error {
	err := r.rc.Close()
	r.once.Do(func() {
		if r.onClose != nil {
			r.onClose(r.Usage())
		}
	})
	return err
}
