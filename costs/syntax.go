package costs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// node is one value of a parsed file, with the line it starts on.
type node struct {
	kind  nodeKind
	line  int
	text  string  // scalar
	str   bool    // scalar written as a string (quoted JSON, YAML !!str)
	keys  []*node // mapping keys (scalars), parallel to items
	items []*node // sequence items or mapping values
}

type nodeKind uint8

const (
	scalarNode nodeKind = iota + 1
	listNode
	mapNode
	nullNode
)

func (n *node) describe() string {
	switch n.kind {
	case listNode:
		return "a list"
	case mapNode:
		return "a mapping"
	case nullNode:
		return "null"
	}
	if n.str {
		return strconv.Quote(n.text)
	}
	return n.text
}

// --- YAML ---

var yamlLine = regexp.MustCompile(`line (\d+)`)

func parseYAML(data []byte) (*node, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, &SpecError{Line: 1, Msg: "empty file"}
		}
		line := 0
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
		}
		return nil, &SpecError{Line: line, Msg: "bad YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		line := extra.Line
		if err != nil {
			line = 0
		}
		return nil, &SpecError{Line: line, Msg: "more than one YAML document: a file holds one table"}
	}
	return fromYAML(&doc, 0)
}

func fromYAML(y *yaml.Node, depth int) (*node, error) {
	if depth > 64 {
		return nil, &SpecError{Line: y.Line, Msg: "nested too deeply"}
	}
	switch y.Kind {
	case yaml.DocumentNode:
		if len(y.Content) == 0 {
			return nil, &SpecError{Line: y.Line, Msg: "empty file"}
		}
		return fromYAML(y.Content[0], depth+1)
	case yaml.AliasNode:
		return nil, &SpecError{Line: y.Line, Msg: "YAML aliases are not supported in cost tables"}
	case yaml.ScalarNode:
		if y.Tag == "!!null" {
			return &node{kind: nullNode, line: y.Line}, nil
		}
		return &node{kind: scalarNode, line: y.Line, text: y.Value, str: y.Tag == "!!str"}, nil
	case yaml.SequenceNode:
		n := &node{kind: listNode, line: y.Line}
		for _, c := range y.Content {
			cn, err := fromYAML(c, depth+1)
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, cn)
		}
		return n, nil
	case yaml.MappingNode:
		n := &node{kind: mapNode, line: y.Line}
		for i := 0; i+1 < len(y.Content); i += 2 {
			k, v := y.Content[i], y.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return nil, &SpecError{Line: k.Line, Msg: "mapping keys must be plain strings"}
			}
			if k.Value == "<<" {
				return nil, &SpecError{Line: k.Line, Msg: "YAML merge keys are not supported in cost tables"}
			}
			kn := &node{kind: scalarNode, line: k.Line, text: k.Value, str: true}
			vn, err := fromYAML(v, depth+1)
			if err != nil {
				return nil, err
			}
			n.keys = append(n.keys, kn)
			n.items = append(n.items, vn)
		}
		return n, nil
	}
	return nil, &SpecError{Line: y.Line, Msg: "unsupported YAML node"}
}

// --- JSON ---

// jsonParser builds nodes from a json.Decoder's tokens, finding each
// token's line from the decoder's offset.
type jsonParser struct {
	data  []byte
	dec   *json.Decoder
	nl    []int // offsets of '\n'
	depth int
}

func parseJSON(data []byte) (*node, error) {
	p := &jsonParser{data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	p.dec.UseNumber()
	for i, c := range data {
		if c == '\n' {
			p.nl = append(p.nl, i)
		}
	}
	n, err := p.value()
	if err != nil {
		return nil, err
	}
	if _, err := p.dec.Token(); err != io.EOF {
		return nil, &SpecError{Line: p.line(int(p.dec.InputOffset())), Msg: "bad JSON: data after the table's closing brace"}
	}
	return n, nil
}

// line returns the 1-based line of a byte offset.
func (p *jsonParser) line(off int) int {
	return sort.SearchInts(p.nl, off) + 1
}

// start returns the offset where the next token starts.
func (p *jsonParser) start() int {
	off := int(p.dec.InputOffset())
	for off < len(p.data) {
		switch p.data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

func (p *jsonParser) token() (json.Token, int, error) {
	at := p.start()
	tok, err := p.dec.Token()
	if err != nil {
		var se *json.SyntaxError
		line := p.line(at)
		if errors.As(err, &se) {
			line = p.line(int(se.Offset))
		}
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, 0, &SpecError{Line: p.line(len(p.data)), Msg: "bad JSON: unexpected end of file"}
		}
		return nil, 0, &SpecError{Line: line, Msg: "bad JSON: " + err.Error()}
	}
	return tok, p.line(at), nil
}

func (p *jsonParser) value() (*node, error) {
	tok, line, err := p.token()
	if err != nil {
		return nil, err
	}
	return p.fromToken(tok, line)
}

func (p *jsonParser) fromToken(tok json.Token, line int) (*node, error) {
	switch v := tok.(type) {
	case json.Delim:
		p.depth++
		defer func() { p.depth-- }()
		if p.depth > 64 {
			return nil, &SpecError{Line: line, Msg: "nested too deeply"}
		}
		switch v {
		case '{':
			n := &node{kind: mapNode, line: line}
			for p.dec.More() {
				ktok, kline, err := p.token()
				if err != nil {
					return nil, err
				}
				key, _ := ktok.(string)
				vn, err := p.value()
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, &node{kind: scalarNode, line: kline, text: key, str: true})
				n.items = append(n.items, vn)
			}
			if _, _, err := p.token(); err != nil { // '}'
				return nil, err
			}
			return n, nil
		case '[':
			n := &node{kind: listNode, line: line}
			for p.dec.More() {
				vn, err := p.value()
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, vn)
			}
			if _, _, err := p.token(); err != nil { // ']'
				return nil, err
			}
			return n, nil
		}
		return nil, &SpecError{Line: line, Msg: "bad JSON: unexpected " + v.String()}
	case string:
		return &node{kind: scalarNode, line: line, text: v, str: true}, nil
	case json.Number:
		return &node{kind: scalarNode, line: line, text: v.String()}, nil
	case bool:
		return &node{kind: scalarNode, line: line, text: strconv.FormatBool(v)}, nil
	case nil:
		return &node{kind: nullNode, line: line}, nil
	}
	return nil, &SpecError{Line: line, Msg: fmt.Sprintf("bad JSON: unexpected token %v", tok)}
}

// --- decoding nodes into a Spec ---

// lineMap records the line of every field path, to place New's errors.
type lineMap map[string]int

// find returns the line of field, or of its nearest recorded parent.
func (m lineMap) find(field string) int {
	for f := field; f != ""; {
		if l, ok := m[f]; ok {
			return l
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			break
		}
		// Keep "methods[a.b]" whole: a '.' inside brackets is part of a name.
		if open := strings.LastIndexByte(f[:i+1], '['); open >= 0 && f[i] == '.' && !strings.Contains(f[open:i], "]") {
			i = open
		}
		f = f[:i]
	}
	return 0
}
