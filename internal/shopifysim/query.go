package shopifysim

import (
	"fmt"
	"strconv"
	"strings"
)

// field is one selected field of a GraphQL query.
type field struct {
	name  string // the field's name (not its alias)
	key   string // the response key: alias or name
	size  int64  // first: or last: N; 0 when the field is no connection
	sel   []*field
	isSel bool // has a selection set
}

// op is a parsed operation.
type op struct {
	mutation bool
	sel      []*field
}

// parser reads the subset of GraphQL the simulator serves: one query or
// mutation (named or not, with variable definitions), fields with aliases,
// arguments and selection sets, directives skipped. Fragments are refused.
type parser struct {
	src  string
	pos  int
	vars map[string]any
	err  string
	tok  string
}

const maxDepth = 32

func parse(query string, vars map[string]any) (*op, string) {
	p := &parser{src: query, vars: vars}
	p.next()
	o := &op{}
	switch p.tok {
	case "query", "mutation", "subscription":
		if p.tok == "subscription" {
			return nil, "subscriptions are not served"
		}
		o.mutation = p.tok == "mutation"
		p.next()
		if isName(p.tok) {
			p.next()
		}
		if p.tok == "(" {
			p.skipParens()
		}
	case "fragment":
		return nil, "the simulator serves no fragments"
	}
	if p.tok != "{" {
		return nil, fmt.Sprintf("syntax error: want '{', got %q", p.tok)
	}
	o.sel = p.selection(0)
	if p.err == "" && p.tok != "" {
		p.err = fmt.Sprintf("syntax error: %q after the operation (one operation per request)", p.tok)
	}
	if p.err != "" {
		return nil, p.err
	}
	return o, ""
}

func isName(t string) bool {
	if t == "" {
		return false
	}
	c := t[0]
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// next reads the next token into p.tok ("" at the end).
func (p *parser) next() {
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',':
			p.pos++
			continue
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
			continue
		}
		break
	}
	if p.pos >= len(p.src) {
		p.tok = ""
		return
	}
	start := p.pos
	c := p.src[p.pos]
	switch {
	case c == '"':
		p.pos++
		for p.pos < len(p.src) && p.src[p.pos] != '"' {
			if p.src[p.pos] == '\\' {
				p.pos++
			}
			p.pos++
		}
		p.pos++
	case c == '.' && strings.HasPrefix(p.src[p.pos:], "..."):
		p.pos += 3
	case c == '_' || c == '$' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
		p.pos++
		for p.pos < len(p.src) {
			c := p.src[p.pos]
			if c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
				p.pos++
				continue
			}
			break
		}
	default:
		p.pos++
	}
	p.tok = p.src[start:min(p.pos, len(p.src))]
}

func (p *parser) skipParens() {
	depth := 0
	for p.tok != "" {
		switch p.tok {
		case "(":
			depth++
		case ")":
			depth--
		}
		p.next()
		if depth == 0 {
			return
		}
	}
	p.err = "syntax error: unclosed '('"
}

// selection reads "{ field ... }", p.tok being "{".
func (p *parser) selection(depth int) []*field {
	if depth > maxDepth {
		p.err = "query nested too deeply"
		return nil
	}
	p.next()
	var out []*field
	for p.err == "" && p.tok != "}" {
		if p.tok == "" {
			p.err = "syntax error: unclosed '{'"
			return nil
		}
		if p.tok == "..." {
			p.err = "the simulator serves no fragments"
			return nil
		}
		if !isName(p.tok) {
			p.err = fmt.Sprintf("syntax error: want a field, got %q", p.tok)
			return nil
		}
		f := &field{name: p.tok, key: p.tok}
		p.next()
		if p.tok == ":" {
			p.next()
			if !isName(p.tok) {
				p.err = "syntax error: want a field name after an alias"
				return nil
			}
			f.name = p.tok
			p.next()
		}
		if p.tok == "(" {
			p.args(f)
		}
		for p.tok == "@" { // directives: skipped
			p.next()
			p.next()
			if p.tok == "(" {
				p.skipParens()
			}
		}
		if p.tok == "{" {
			f.isSel = true
			f.sel = p.selection(depth + 1)
		}
		out = append(out, f)
	}
	p.next() // '}'
	return out
}

// args reads "(name: value, ...)", keeping first/last.
func (p *parser) args(f *field) {
	p.next()
	for p.err == "" && p.tok != ")" {
		name := p.tok
		p.next()
		if p.tok != ":" {
			p.err = fmt.Sprintf("syntax error: want ':' after argument %q", name)
			return
		}
		p.next()
		val := p.tok
		if val == "[" || val == "{" {
			p.skipValue()
		} else {
			p.next()
		}
		if name == "first" || name == "last" {
			n, msg := p.size(val)
			if msg != "" {
				p.err = msg
				return
			}
			f.size = n
		}
		if p.tok == "" {
			p.err = "syntax error: unclosed '('"
			return
		}
	}
	p.next()
}

func (p *parser) skipValue() {
	depth := 0
	for p.tok != "" {
		switch p.tok {
		case "[", "{":
			depth++
		case "]", "}":
			depth--
		}
		p.next()
		if depth == 0 {
			return
		}
	}
}

// size reads a first/last value: an integer or a variable holding one.
func (p *parser) size(val string) (int64, string) {
	if v, ok := strings.CutPrefix(val, "$"); ok {
		n, ok := p.vars[v].(float64)
		if !ok {
			return 0, fmt.Sprintf("variable $%s: want an integer for first/last", v)
		}
		val = strconv.FormatFloat(n, 'f', -1, 64)
	}
	n, err := strconv.ParseInt(val, 10, 64)
	if err != nil || n < 0 || n > 250 {
		return 0, fmt.Sprintf("first/last %q: want an integer from 0 to 250 (Shopify's maximum page size)", val)
	}
	return n, ""
}

// cost is the simulator's calculated query cost, modelled on Shopify's
// rules (https://shopify.dev/docs/apps/build/apis/graphql-admin/rate-limits,
// read 2026-11-28: scalars and enums 0, objects 1, connections "sized by
// first and last arguments", mutations 10): a scalar field costs 0; an
// object field 1 plus its selection; a connection (a field with first: or
// last: N) 2 plus N times the cost of one item, an item costing 1 plus
// its fields (edges, node and nodes being the item's wrappers, pageInfo
// free); a mutation 10 plus its selection. items, when >= 0, caps N: the
// items the shop really has, for actualQueryCost.
func cost(sel []*field, items int64) int64 {
	var n int64
	for _, f := range sel {
		switch {
		case !f.isSel:
		case f.size > 0 || isConnection(f):
			k := f.size
			if items >= 0 {
				k = min(k, items)
			}
			n += 2 + k*itemCost(f.sel, items)
		default:
			n += 1 + cost(f.sel, items)
		}
	}
	return n
}

func isConnection(f *field) bool {
	for _, c := range f.sel {
		if c.name == "edges" || c.name == "nodes" {
			return true
		}
	}
	return false
}

// itemCost is one item's cost in a connection's selection.
func itemCost(sel []*field, items int64) int64 {
	var n int64 = 1
	for _, f := range sel {
		switch f.name {
		case "edges":
			for _, c := range f.sel {
				if c.name == "node" {
					n += cost(c.sel, items)
				}
			}
		case "nodes":
			n += cost(f.sel, items)
		case "pageInfo":
		default:
			n += cost([]*field{f}, items)
		}
	}
	return n
}

func (o *op) cost(items int64) int64 {
	n := cost(o.sel, items)
	if o.mutation {
		n += 10
	}
	return n
}

// data builds the response's data for a selection: scalars are strings
// ("id" a gid), objects nested, connections items edges and nodes.
func data(sel []*field, items int64, typ string, idx int64) map[string]any {
	out := map[string]any{}
	for _, f := range sel {
		switch {
		case !f.isSel && f.name == "id":
			out[f.key] = fmt.Sprintf("gid://shopify/%s/%d", typ, idx+1)
		case !f.isSel && (f.name == "hasNextPage" || f.name == "hasPreviousPage"):
			out[f.key] = false
		case !f.isSel:
			out[f.key] = fmt.Sprintf("%s %d", f.name, idx+1)
		case f.size > 0 || isConnection(f):
			out[f.key] = connection(f, min(f.size, items), items)
		default:
			out[f.key] = data(f.sel, items, typeName(f.name), idx)
		}
	}
	return out
}

func connection(f *field, k, items int64) map[string]any {
	out := map[string]any{}
	t := typeName(f.name)
	for _, c := range f.sel {
		switch c.name {
		case "edges":
			edges := make([]any, k)
			for i := range k {
				e := map[string]any{}
				for _, ec := range c.sel {
					if ec.name == "node" {
						e[ec.key] = data(ec.sel, items, t, i)
					} else if ec.name == "cursor" {
						e[ec.key] = fmt.Sprintf("cursor-%d", i+1)
					}
				}
				edges[i] = e
			}
			out[c.key] = edges
		case "nodes":
			nodes := make([]any, k)
			for i := range k {
				nodes[i] = data(c.sel, items, t, i)
			}
			out[c.key] = nodes
		default:
			out[c.key] = data(c.sel, items, "PageInfo", 0)
		}
	}
	return out
}

// typeName guesses a type from a field: "products" -> "Product".
func typeName(name string) string {
	name = strings.TrimSuffix(name, "s")
	if name == "" {
		return "Node"
	}
	return strings.ToUpper(name[:1]) + name[1:]
}
