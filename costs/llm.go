package costs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// BodyFormat names the request and response body format of a method whose
// cost is read from its body: the prompt and output ceiling of an LLM call,
// the query cost of a GraphQL call.
type BodyFormat string

// The body formats a method can be priced by (Method.Body).
const (
	// OpenAIChat is OpenAI's Chat Completions API (POST /v1/chat/completions).
	OpenAIChat BodyFormat = "openai-chat"
	// OpenAIResponses is OpenAI's Responses API (POST /v1/responses).
	OpenAIResponses BodyFormat = "openai-responses"
	// OpenAIEmbeddings is OpenAI's Embeddings API (POST /v1/embeddings).
	OpenAIEmbeddings BodyFormat = "openai-embeddings"
	// AnthropicMessages is Anthropic's Messages API (POST /v1/messages).
	AnthropicMessages BodyFormat = "anthropic-messages"
	// ShopifyGraphQL is Shopify's Admin GraphQL API, whose cost is the
	// calculated query cost (extensions.cost).
	ShopifyGraphQL BodyFormat = "shopify-graphql"
)

// BodyFormats lists the known body formats.
var BodyFormats = []BodyFormat{OpenAIChat, OpenAIResponses, OpenAIEmbeddings, AnthropicMessages, ShopifyGraphQL}

// IsLLM reports whether the format is an LLM API priced in tokens.
func (f BodyFormat) IsLLM() bool { return f != ShopifyGraphQL && slices.Contains(BodyFormats, f) }

// MaxBodyBytes is the largest request body EstimateTokens and
// Table.EstimateRequest read: 32 MiB, above the largest request any of the
// providers accepts (OpenAI and Anthropic both document 32 MB request
// limits). A larger body is an error wrapping ErrBodyTooLarge.
const MaxBodyBytes = 32 << 20

// ErrBodyTooLarge is wrapped by EstimateRequest for a request body larger
// than MaxBodyBytes: it is not read whole, so it cannot be priced.
var ErrBodyTooLarge = errors.New("costs: request body too large to price")

// ErrUnbounded is wrapped by EstimateTokens for a request whose tokens
// cannot be bounded from its body: an image, audio or file part, a
// built-in server tool, a reference to an earlier response, no output
// ceiling. The error names what. Such a request is never sent on a guess.
var ErrUnbounded = errors.New("costs: the request's tokens cannot be bounded from its body")

// ErrBadBody is wrapped by EstimateTokens for a body that is not the
// format's JSON request.
var ErrBadBody = errors.New("costs: request body is not a valid request")

// Overheads added to the prompt bound (see EstimateTokens).
const (
	// RequestOverhead is added once per request: the chat template's
	// framing and the reply priming. OpenAI's cookbook counts 3 tokens
	// ("every reply is primed with <|start|>assistant<|message|>");
	// Anthropic does not publish its framing. 16 covers both with margin.
	RequestOverhead = 16
	// MessageOverhead is added per message (OpenAI's cookbook: 3 tokens a
	// message, 1 more with a name). The message's own JSON framing
	// ({"role":"user","content":""}, 28 bytes) already covers it; the
	// margin costs little.
	MessageOverhead = 4
	// ToolsOverhead is added when a request declares tools: the system
	// prompt the provider adds to enable tool use. Anthropic publishes it
	// per model, at most 530 tokens in its table
	// (https://docs.anthropic.com/en/docs/tool-use-pricing-and-tokens, read
	// 2026-11-28); OpenAI does not publish its tool framing. 2048 is four
	// times the largest published figure.
	ToolsOverhead = 2048
)

// maxCeiling bounds an output ceiling, so that ceilings, sums and prices
// never overflow an int64: no model writes a trillion tokens.
const maxCeiling = 1 << 40

// TokenEstimate is what an LLM request's body says it may cost, in tokens.
type TokenEstimate struct {
	// Format is the request's API.
	Format BodyFormat `json:"format"`
	// Model is the request's model ("" when the body names none).
	Model string `json:"model,omitempty"`
	// Input is an upper bound of the prompt's tokens (see EstimateTokens).
	Input int64 `json:"input_tokens"`
	// Output is the output ceiling: max_tokens (or max_completion_tokens,
	// max_output_tokens) times the number of choices n.
	Output int64 `json:"output_tokens"`
	// Stream reports whether the request asks for a streamed response;
	// StreamUsage whether the stream will carry its usage (always for
	// Anthropic; for OpenAI Chat Completions only with
	// stream_options.include_usage).
	Stream      bool `json:"stream,omitempty"`
	StreamUsage bool `json:"stream_usage,omitempty"`
}

// Total is Input + Output: what OpenAI's tokens-per-minute limit counts.
func (e TokenEstimate) Total() int64 { return e.Input + e.Output }

// EstimateTokens reads an LLM request body of the given format and bounds
// what it may cost, never below what the provider counts:
//
//   - Output is the request's output ceiling (max_completion_tokens or
//     max_tokens for Chat Completions, the larger when both are given,
//     times n; max_output_tokens for Responses; max_tokens for Anthropic;
//     0 for Embeddings). A request without one is unbounded: refused.
//   - Input bounds the prompt by the UTF-8 bytes of the JSON of every
//     field the provider turns into prompt tokens (messages, system,
//     instructions, input, tools, the response format's schema), plus
//     RequestOverhead, MessageOverhead per message and ToolsOverhead when
//     tools are declared; for embeddings of token arrays, the tokens
//     themselves. The bound holds because no tokenizer yields more tokens
//     than bytes: byte-level BPE (tiktoken's cl100k_base, o200k_base)
//     makes every token of one byte or more, and a tokenizer with byte
//     fallback spends at most one token per byte of text it does not know;
//     JSON only adds bytes (quotes, keys, escapes) to the text it carries.
//     The overheads cover the template's special tokens.
//   - Parts whose tokens do not follow from the body are refused
//     (ErrUnbounded): images, audio and files (their tokens depend on the
//     media's size), built-in server tools (web search, file search,
//     code interpreter, MCP: their results join the prompt), and
//     references to stored state (previous_response_id, conversation,
//     prompt templates, predicted outputs).
//
// A body that is not valid JSON of the format is an error wrapping
// ErrBadBody. EstimateTokens never panics.
func EstimateTokens(format BodyFormat, body []byte) (TokenEstimate, error) {
	if len(body) > MaxBodyBytes {
		return TokenEstimate{}, fmt.Errorf("%w: %d bytes, more than %d", ErrBodyTooLarge, len(body), MaxBodyBytes)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return TokenEstimate{}, fmt.Errorf("%w: %s: want a JSON object: %v", ErrBadBody, format, err)
	}
	e := TokenEstimate{Format: format}
	if m, ok := fields["model"]; ok {
		if err := json.Unmarshal(m, &e.Model); err != nil {
			return e, fmt.Errorf("%w: %s: model: want a string", ErrBadBody, format)
		}
	}
	var err error
	switch format {
	case OpenAIChat:
		err = e.openAIChat(fields)
	case OpenAIResponses:
		err = e.openAIResponses(fields)
	case OpenAIEmbeddings:
		err = e.openAIEmbeddings(fields)
	case AnthropicMessages:
		err = e.anthropicMessages(fields)
	default:
		return e, fmt.Errorf("%w: format %q is not an LLM API (known: %s)", ErrBadBody, format, formatList())
	}
	if err != nil {
		return TokenEstimate{}, err
	}
	if format != OpenAIEmbeddings {
		e.Input += RequestOverhead
	}
	return e, nil
}

func formatList() string {
	s := make([]string, len(BodyFormats))
	for i, f := range BodyFormats {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

// refused lists, per format, the top-level fields whose tokens the body
// does not bound.
var refused = map[BodyFormat][]string{
	OpenAIChat:        {"prediction", "web_search_options", "audio"},
	OpenAIResponses:   {"previous_response_id", "conversation", "prompt"},
	AnthropicMessages: {"mcp_servers", "container"},
}

// mediaTypes are content part types whose tokens depend on media the body
// does not size.
var mediaTypes = []string{
	"image", "image_url", "input_image", "input_audio", "audio", "file", "input_file",
	"document", "search_result", "container_upload", "image_file",
}

func (e *TokenEstimate) openAIChat(f map[string]json.RawMessage) error {
	if err := e.common(f); err != nil {
		return err
	}
	n, err := intField(e.Format, f, "n", 1)
	if err != nil {
		return err
	}
	if n < 1 || n > 128 {
		return fmt.Errorf("%w: %s: n %d: want 1 to 128", ErrBadBody, e.Format, n)
	}
	mct, err := intField(e.Format, f, "max_completion_tokens", -1)
	if err != nil {
		return err
	}
	mt, err := intField(e.Format, f, "max_tokens", -1)
	if err != nil {
		return err
	}
	ceil := max(mct, mt)
	if ceil < 0 {
		return fmt.Errorf("%w: %s: no max_completion_tokens or max_tokens: the output is unbounded; set one", ErrUnbounded, e.Format)
	}
	if ceil > maxCeiling {
		return fmt.Errorf("%w: %s: output ceiling %d: want at most %d", ErrBadBody, e.Format, ceil, int64(maxCeiling))
	}
	e.Output = ceil * n
	if err := e.prompt(f, "messages", true); err != nil {
		return err
	}
	if err := e.tools(f, "tools", "functions"); err != nil {
		return err
	}
	if err := e.addField(f, "response_format"); err != nil {
		return err
	}
	if mod, ok := f["modalities"]; ok && bytes.Contains(mod, []byte(`"audio"`)) {
		return fmt.Errorf("%w: %s: modalities includes audio, whose tokens the body does not bound", ErrUnbounded, e.Format)
	}
	e.streamFlags(f, false)
	return nil
}

func (e *TokenEstimate) openAIResponses(f map[string]json.RawMessage) error {
	if err := e.common(f); err != nil {
		return err
	}
	ceil, err := intField(e.Format, f, "max_output_tokens", -1)
	if err != nil {
		return err
	}
	if ceil < 0 {
		return fmt.Errorf("%w: %s: no max_output_tokens: the output is unbounded; set it", ErrUnbounded, e.Format)
	}
	if ceil > maxCeiling {
		return fmt.Errorf("%w: %s: max_output_tokens %d: want at most %d", ErrBadBody, e.Format, ceil, int64(maxCeiling))
	}
	e.Output = ceil
	if err := e.prompt(f, "input", true); err != nil {
		return err
	}
	if err := e.addField(f, "instructions"); err != nil {
		return err
	}
	if err := e.tools(f, "tools"); err != nil {
		return err
	}
	if err := e.addField(f, "text"); err != nil { // text.format's JSON schema
		return err
	}
	e.streamFlags(f, true)
	return nil
}

func (e *TokenEstimate) anthropicMessages(f map[string]json.RawMessage) error {
	if err := e.common(f); err != nil {
		return err
	}
	ceil, err := intField(e.Format, f, "max_tokens", -1)
	if err != nil {
		return err
	}
	if ceil < 0 {
		return fmt.Errorf("%w: %s: no max_tokens (the API requires it)", ErrBadBody, e.Format)
	}
	if ceil > maxCeiling {
		return fmt.Errorf("%w: %s: max_tokens %d: want at most %d", ErrBadBody, e.Format, ceil, int64(maxCeiling))
	}
	e.Output = ceil
	if err := e.prompt(f, "messages", true); err != nil {
		return err
	}
	if err := e.prompt(f, "system", false); err != nil {
		return err
	}
	if err := e.tools(f, "tools"); err != nil {
		return err
	}
	e.streamFlags(f, true)
	return nil
}

func (e *TokenEstimate) openAIEmbeddings(f map[string]json.RawMessage) error {
	raw, ok := f["input"]
	if !ok {
		return fmt.Errorf("%w: %s: no input", ErrBadBody, e.Format)
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		e.Input = int64(len(one)) + 1
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || len(items) == 0 {
		return fmt.Errorf("%w: %s: input: want a string, a list of strings or of token arrays", ErrBadBody, e.Format)
	}
	var ints []int64
	if json.Unmarshal(raw, &ints) == nil {
		e.Input = int64(len(ints)) // one array of tokens: counted exactly
		return nil
	}
	for _, it := range items {
		var s string
		var toks []int64
		switch {
		case json.Unmarshal(it, &s) == nil:
			e.Input += int64(len(s)) + 1
		case json.Unmarshal(it, &toks) == nil:
			e.Input += int64(len(toks))
		default:
			return fmt.Errorf("%w: %s: input: want a string, a list of strings or of token arrays", ErrBadBody, e.Format)
		}
	}
	return nil
}

// common refuses the format's unbounded top-level fields.
func (e *TokenEstimate) common(f map[string]json.RawMessage) error {
	for _, name := range refused[e.Format] {
		if v, ok := f[name]; ok && !isNull(v) {
			return fmt.Errorf("%w: %s: %s adds tokens the body does not bound", ErrUnbounded, e.Format, name)
		}
	}
	return nil
}

// prompt adds the bound of a prompt field: its JSON's bytes plus the
// per-message overhead, after refusing media parts.
func (e *TokenEstimate) prompt(f map[string]json.RawMessage, name string, required bool) error {
	raw, ok := f[name]
	if !ok || isNull(raw) {
		if required {
			return fmt.Errorf("%w: %s: no %s", ErrBadBody, e.Format, name)
		}
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("%w: %s: %s: %v", ErrBadBody, e.Format, name, err)
	}
	if t := findType(v, mediaTypes, 0); t != "" {
		return fmt.Errorf("%w: %s: %s has a %q part, whose tokens depend on media the body does not size", ErrUnbounded, e.Format, name, t)
	}
	switch v := v.(type) {
	case []any:
		if required && len(v) == 0 {
			return fmt.Errorf("%w: %s: %s is empty", ErrBadBody, e.Format, name)
		}
		e.Input += int64(len(v)) * MessageOverhead
	case string:
	default:
		return fmt.Errorf("%w: %s: %s: want a string or a list", ErrBadBody, e.Format, name)
	}
	e.Input += int64(len(raw))
	return nil
}

// addField adds the bytes of an optional field's JSON.
func (e *TokenEstimate) addField(f map[string]json.RawMessage, name string) error {
	if raw, ok := f[name]; ok && !isNull(raw) {
		e.Input += int64(len(raw))
	}
	return nil
}

// tools adds the bytes of the tool definitions and ToolsOverhead, and
// refuses built-in server tools.
func (e *TokenEstimate) tools(f map[string]json.RawMessage, names ...string) error {
	for _, name := range names {
		raw, ok := f[name]
		if !ok || isNull(raw) {
			continue
		}
		var tools []map[string]any
		if err := json.Unmarshal(raw, &tools); err != nil {
			return fmt.Errorf("%w: %s: %s: want a list of tool objects", ErrBadBody, e.Format, name)
		}
		for i, t := range tools {
			typ, _ := t["type"].(string)
			switch {
			case typ == "" && e.Format == AnthropicMessages, typ == "custom", typ == "function":
			case typ == "" && name == "functions":
			default:
				return fmt.Errorf("%w: %s: %s[%d] is a %q tool, whose results or framing the body does not bound", ErrUnbounded, e.Format, name, i, typ)
			}
		}
		if len(tools) > 0 {
			e.Input += int64(len(raw)) + ToolsOverhead
		}
	}
	return nil
}

func (e *TokenEstimate) streamFlags(f map[string]json.RawMessage, always bool) {
	var stream bool
	if raw, ok := f["stream"]; ok && json.Unmarshal(raw, &stream) == nil && stream {
		e.Stream = true
		e.StreamUsage = always
		if !always {
			var so struct {
				IncludeUsage bool `json:"include_usage"`
			}
			if raw, ok := f["stream_options"]; ok && json.Unmarshal(raw, &so) == nil {
				e.StreamUsage = so.IncludeUsage
			}
		}
	}
}

// findType returns the first "type" value among types found in v, or "".
func findType(v any, types []string, depth int) string {
	if depth > 64 {
		return ""
	}
	switch v := v.(type) {
	case map[string]any:
		if t, ok := v["type"].(string); ok && slices.Contains(types, t) {
			return t
		}
		for _, c := range v {
			if t := findType(c, types, depth+1); t != "" {
				return t
			}
		}
	case []any:
		for _, c := range v {
			if t := findType(c, types, depth+1); t != "" {
				return t
			}
		}
	}
	return ""
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// intField reads an optional non-negative integer field; def when absent.
func intField(format BodyFormat, f map[string]json.RawMessage, name string, def int64) (int64, error) {
	raw, ok := f[name]
	if !ok || isNull(raw) {
		return def, nil
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err != nil || n < 0 {
		return 0, fmt.Errorf("%w: %s: %s: want an integer >= 0, got %.40s", ErrBadBody, format, name, raw)
	}
	return n, nil
}
