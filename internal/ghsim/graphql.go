package ghsim

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
)

// gqlRequest is the body of POST /graphql.
type gqlRequest struct {
	Query     string         `json:"query"`
	Variables map[string]any `json:"variables"`
}

// QueryCost returns the primary-limit points of a GraphQL query by GitHub's
// published formula
// (https://docs.github.com/en/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api#predicting-the-point-value-of-a-query,
// read 2026-11-28): add up the requests needed to fulfil each connection
// (a field with a first or last argument), assuming each reaches its
// first/last, i.e. the product of the first/last of the connections
// enclosing it; divide by 100 and round to the nearest whole number; at
// least 1. A first/last given as a variable is read from variables.
// Fragments are counted where they are defined, at the top level: an
// approximation GitHub's page does not cover. It never fails: a query it
// cannot read costs 1.
func QueryCost(query string, variables map[string]any) int64 {
	toks := lexGraphQL(query)
	var requests int64
	stack := []int64{1} // multiplier of the enclosing selection set
	pending := int64(0) // first/last of the field just read, 0 if none
	for i := 0; i < len(toks); i++ {
		switch toks[i] {
		case "(":
			depth := 1
			for i++; i < len(toks) && depth > 0; i++ {
				switch toks[i] {
				case "(":
					depth++
				case ")":
					depth--
				case "first", "last":
					if i+2 < len(toks) && toks[i+1] == ":" && depth == 1 {
						if n := argValue(toks[i+2], variables); n > pending {
							pending = n
						}
					}
				}
			}
			i--
		case "{":
			top := stack[len(stack)-1]
			if pending > 0 {
				requests = satAdd(requests, top)
				top = satMul(top, pending)
			}
			stack = append(stack, top)
			pending = 0
		case "}":
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
			pending = 0
		default:
			if isName(toks[i]) {
				pending = 0
			}
		}
	}
	points := (requests + 50) / 100
	return max(points, 1)
}

func satAdd(a, b int64) int64 {
	if a > (1<<62)-b {
		return 1 << 62
	}
	return a + b
}

func satMul(a, b int64) int64 {
	if b != 0 && a > (1<<62)/b {
		return 1 << 62
	}
	return a * b
}

// argValue reads an integer literal or a variable ($name) holding one.
func argValue(tok string, variables map[string]any) int64 {
	if name, ok := strings.CutPrefix(tok, "$"); ok {
		switch v := variables[name].(type) {
		case float64:
			if v > 0 && v < 1e9 {
				return int64(v)
			}
		case json.Number:
			n, _ := v.Int64()
			return max(n, 0)
		case int:
			return int64(max(v, 0))
		case int64:
			return max(v, 0)
		}
		return 0
	}
	n, err := strconv.ParseInt(tok, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func isName(tok string) bool {
	if tok == "" {
		return false
	}
	r := rune(tok[0])
	return r == '_' || unicode.IsLetter(r)
}

// isMutation reports whether a GraphQL document's operation is a mutation.
func isMutation(query string) bool {
	for _, t := range lexGraphQL(query) {
		switch t {
		case "mutation":
			return true
		case "{", "query", "subscription":
			return false
		}
	}
	return false
}

// lexGraphQL splits a GraphQL document into names ($ kept on variables),
// numbers and punctuation, dropping strings, comments and commas.
func lexGraphQL(q string) []string {
	var toks []string
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '#':
			for i < len(q) && q[i] != '\n' {
				i++
			}
		case c == '"':
			if strings.HasPrefix(q[i:], `"""`) {
				end := strings.Index(q[i+3:], `"""`)
				if end < 0 {
					return toks
				}
				i += 3 + end + 3
				continue
			}
			for i++; i < len(q) && q[i] != '"'; i++ {
				if q[i] == '\\' {
					i++
				}
			}
			i++
		case c == '$' || c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(q) && (q[j] == '_' || q[j] == '.' || q[j] >= '0' && q[j] <= '9' || q[j] >= 'a' && q[j] <= 'z' || q[j] >= 'A' && q[j] <= 'Z') {
				j++
			}
			toks = append(toks, q[i:j])
			i = j
		case strings.IndexByte("{}():[]!=@", c) >= 0:
			toks = append(toks, string(c))
			i++
		default:
			i++
		}
	}
	return toks
}
