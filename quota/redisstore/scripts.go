package redisstore

import (
	"embed"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua lua/lib/*.lua
var luaFS embed.FS

// libFiles are the shared Lua pieces (lua/lib), in the order their
// definitions are emitted: a definition uses only those before it.
var libFiles = []string{
	"clock", "window", "log", "retain", "marker", "loss", "walk", "lifetime", "decide",
}

// scriptTable is every script: its body (lua/NAME.lua) and the protocol
// constants it is generated with besides luaShared. A new script is one
// line here: the pieces of lua/lib it uses are found in its body.
//
// A script may have a prefix (lua/PREFIX.lua): code that runs before the
// definitions only its body uses are made. Each run of a script makes
// every top-level function it defines anew (a closure per definition, its
// upvalues found one by one), which costs a lone decision more than its
// Lua does (issue 26): a prefix that decides and returns pays only for the
// definitions it uses itself, emitted before it.
var scriptTable = []struct {
	name   string
	consts func() []luaConst
	prefix string
}{
	{"take", takeConstants, "lone"},
	{"batch", batchConstants, ""},
	{"settle", nil, ""}, // Settle, and Refund (a settle to zero)
	{"usage", nil, ""},
	{"entries", nil, ""},
	{"adjust", nil, ""},
	{"exhaust", nil, ""},
	{"mark", nil, ""},
	{"lease", nil, ""},
	{"fenced", nil, ""},
	{"trueup", nil, ""},
}

// scripts are the assembled scripts, by name.
var scripts = func() map[string]*redis.Script {
	lib := parseLib()
	m := map[string]*redis.Script{}
	for _, s := range scriptTable {
		var cs []luaConst
		if s.consts != nil {
			cs = s.consts()
		}
		m[s.name] = redis.NewScript(assemble(lib, s.name, s.prefix, slices.Concat(luaShared, cs)))
	}
	return m
}()

var (
	takeScript    = scripts["take"]
	batchScript   = scripts["batch"]
	settleScript  = scripts["settle"]
	usageScript   = scripts["usage"]
	entriesScript = scripts["entries"]
	adjustScript  = scripts["adjust"]
	exhaustScript = scripts["exhaust"]
	markScript    = scripts["mark"]
	leaseScript   = scripts["lease"]
	fencedScript  = scripts["fenced"]
)

// libDef is one top-level definition of a lua/lib file (a local function
// or constant, with the comment above it): what assembly includes or not.
type libDef struct {
	file  string
	names []string // the locals it defines
	text  string
	code  string // text without comments and strings (stripLua)
}

var defLine = regexp.MustCompile(`^local (?:function ([A-Za-z_]\w*)|([A-Za-z_]\w*(?:, *[A-Za-z_]\w*)*) *=)`)

// parseLib splits the lua/lib files into their definitions, in libFiles
// order. Lines outside a definition (a file's header comment) are dropped.
func parseLib() []libDef {
	var defs []libDef
	for _, f := range libFiles {
		b, err := luaFS.ReadFile("lua/lib/" + f + ".lua")
		if err != nil {
			panic(err)
		}
		lines := strings.Split(string(b), "\n")
		var cur *libDef
		var comment []string // the comment lines just above
		for _, l := range lines {
			if m := defLine.FindStringSubmatch(l); m != nil {
				names := []string{m[1]}
				if m[1] == "" {
					names = strings.Split(strings.ReplaceAll(m[2], " ", ""), ",")
				}
				defs = append(defs, libDef{file: f, names: names, text: strings.Join(comment, "\n")})
				cur, comment = &defs[len(defs)-1], nil
				if cur.text != "" {
					cur.text += "\n"
				}
				cur.text += l + "\n"
				continue
			}
			switch {
			case strings.HasPrefix(l, "--"):
				comment = append(comment, l)
			case l == "":
				if len(comment) > 0 {
					comment = nil // a free-standing comment (a file's header)
				} else if cur != nil {
					cur.text += "\n"
				}
			default:
				if cur == nil {
					panic(fmt.Sprintf("redisstore: lua/lib/%s.lua: a statement outside a definition: %q", f, l))
				}
				for _, c := range comment {
					cur.text += c + "\n"
				}
				comment = nil
				cur.text += l + "\n"
			}
		}
	}
	for i := range defs {
		defs[i].code = stripLua(defs[i].text)
	}
	return defs
}

// assemble returns script name's source: the constants of cs and the
// definitions of lib that its body uses, directly or through another, in
// lib order, then the body. With a prefix (lua/PREFIX.lua, "" for none),
// the definitions the prefix uses come first, then the prefix, then the
// others the body uses. The text depends on nothing else: one script, one
// SHA1.
func assemble(lib []libDef, name, prefix string, cs []luaConst) string {
	b, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	var pre []byte
	if prefix != "" {
		if pre, err = luaFS.ReadFile("lua/" + prefix + ".lua"); err != nil {
			panic(err)
		}
	}
	first := needed(lib, stripLua(string(pre)))
	all := needed(lib, stripLua(string(pre)+string(b)))
	var src strings.Builder
	for i, d := range lib {
		if first[i] {
			src.WriteString(d.text)
			src.WriteString("\n")
		}
	}
	if prefix != "" {
		src.Write(pre)
		src.WriteString("\n")
	}
	for i, d := range lib {
		if all[i] && !first[i] {
			src.WriteString(d.text)
			src.WriteString("\n")
		}
	}
	src.Write(b)
	code := src.String()
	return "-- " + name + ".lua, assembled (scripts.go)\n" + inline(cs, code)
}

// inline returns code with each name of cs it uses (as a variable) replaced
// by its value. A constant written as a local of the script's chunk would
// be an upvalue of every function that reads it, found anew each time the
// script runs and makes its closures: in the take script, most of what
// its definitions cost a decision (issue 26). A number in the code is read
// from the function's constants instead.
func inline(cs []luaConst, code string) string {
	val := make(map[string]string, len(cs))
	for _, c := range cs {
		v := strconv.FormatInt(c.value, 10)
		if c.value < 0 {
			v = "(" + v + ")" // never "--1", a comment
		}
		val[c.name] = v
	}
	stripped := stripLua(code)
	var b strings.Builder
	last := 0
	for _, loc := range luaIdent.FindAllStringIndex(stripped, -1) {
		v, ok := val[stripped[loc[0]:loc[1]]]
		if !ok || loc[0] > 0 && (stripped[loc[0]-1] == '.' || stripped[loc[0]-1] == ':') {
			continue
		}
		b.WriteString(code[last:loc[0]])
		b.WriteString(v)
		last = loc[1]
	}
	b.WriteString(code[last:])
	return b.String()
}

// needed returns which definitions of lib code (stripLua's) uses, directly
// or through another.
func needed(lib []libDef, code string) []bool {
	used := make([]bool, len(lib))
	// walk back from the code: a definition is needed when the code, or a
	// needed definition after it, uses one of its names
	for i := len(lib) - 1; i >= 0; i-- {
		for _, n := range lib[i].names {
			if uses(code, n) {
				used[i] = true
			}
			for j := i + 1; j < len(lib) && !used[i]; j++ {
				if used[j] && uses(lib[j].code, n) {
					used[i] = true
				}
			}
		}
	}
	return used
}

var luaIdent = regexp.MustCompile(`[A-Za-z_]\w*`)

// uses reports whether the Lua code (stripLua's: without comments and
// string literals) refers to the variable name, not as a field (t.name,
// t:name).
func uses(code, name string) bool {
	if !strings.Contains(code, name) {
		return false
	}
	for _, loc := range luaIdent.FindAllStringIndex(code, -1) {
		if code[loc[0]:loc[1]] != name {
			continue
		}
		if loc[0] > 0 && (code[loc[0]-1] == ':' || code[loc[0]-1] == '.' && (loc[0] < 2 || code[loc[0]-2] != '.')) {
			continue
		}
		return true
	}
	return false
}

// stripLua blanks out the string literals and comments of src (which
// uses no long brackets).
func stripLua(src string) string {
	out := []byte(src)
	for i := 0; i < len(out); i++ {
		switch c := out[i]; {
		case c == '\'' || c == '"':
			for i++; i < len(out) && out[i] != c && out[i] != '\n'; i++ {
				if out[i] == '\\' && i+1 < len(out) {
					out[i] = ' '
					i++
				}
				out[i] = ' '
			}
		case c == '-' && i+1 < len(out) && out[i+1] == '-':
			for ; i < len(out) && out[i] != '\n'; i++ {
				out[i] = ' '
			}
		}
	}
	return string(out)
}
