package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// TestScriptsAssembled checks what scripts.go assembles from lua/lib: each
// script is the same text every time (one SHA1, the one it runs with);
// every shared definition and generated constant in it is used by the rest
// of it, and every shared name it uses is defined in it before its first
// use (else Lua reads a global: nil); the bodies that read the take
// protocol name every position (no ARGV[3] or KEYS[2]); and a few
// expectations a reader would have (a script of its own carries nothing of
// the log, the batch script nothing of the general path).
func TestScriptsAssembled(t *testing.T) {
	lib := parseLib()
	var libNames []string
	for _, d := range lib {
		libNames = append(libNames, d.names...)
	}
	for _, s := range scriptTable {
		t.Run(s.name, func(t *testing.T) {
			var cs []luaConst
			if s.consts != nil {
				cs = s.consts()
			}
			src := assemble(lib, s.name, s.prefix, slices.Concat(luaShared, cs))
			if again := assemble(parseLib(), s.name, s.prefix, slices.Concat(luaShared, cs)); again != src {
				t.Fatal("two assemblies differ")
			}
			sum := sha1.Sum([]byte(src))
			if got := scripts[s.name].Hash(); got != hex.EncodeToString(sum[:]) {
				t.Fatalf("the script runs as %s, assembled as %x", got, sum)
			}
			code := stripLua(src)
			// every top-level definition of the assembled text is used
			// after it
			def := regexp.MustCompile(`(?m)^local (?:function ([A-Za-z_]\w*)|([A-Za-z_]\w*(?:, *[A-Za-z_]\w*)*) *=)`)
			for _, m := range def.FindAllStringSubmatchIndex(code, -1) {
				var names string
				if m[2] >= 0 {
					names = code[m[2]:m[3]]
				} else {
					names = code[m[4]:m[5]]
				}
				rest := code[m[1]:]
				for _, n := range strings.Split(strings.ReplaceAll(names, " ", ""), ",") {
					if n == "" || n == "_" {
						continue
					}
					if !uses(rest, n) {
						t.Errorf("%s is defined and never used", n)
					}
				}
			}
			// every shared name used is defined before its first use
			body := stripLua(string(must(luaFS.ReadFile("lua/" + s.name + ".lua"))))
			for _, n := range libNames {
				at := definedAt(code, n)
				first := firstUse(code, n)
				if first >= 0 && (at < 0 || at > first) && !definesLocal(body, n) {
					t.Errorf("%s is used at %d before its definition (at %d)", n, first, at)
				}
			}
			if s.consts == nil && strings.Contains(code, "local K_") {
				t.Error("a script off the take protocol has its positions")
			}
		})
	}
	// the bodies that read the take protocol read it by name
	literal := regexp.MustCompile(`(ARGV|KEYS)\[\d+\]`)
	for _, f := range []string{"lua/take.lua", "lua/lone.lua", "lua/batch.lua", "lua/lib/decide.lua", "lua/lib/loss.lua"} {
		if m := literal.FindString(stripLua(string(must(luaFS.ReadFile(f))))); m != "" {
			t.Errorf("%s reads %s by a literal position", f, m)
		}
	}
	has := func(script, name string) bool { return definedAt(stripLua(assembleName(lib, script)), name) >= 0 }
	for _, c := range []struct {
		script, name string
		want         bool
	}{
		{"mark", "int", false}, {"mark", "clock", true}, {"fenced", "clock", false},
		{"lease", "load", false}, {"batch", "load", false}, {"batch", "back", false},
		{"batch", "decide", true}, {"take", "decide", true}, {"take", "asideused", false},
		{"usage", "asideused", true}, {"usage", "remark", false}, {"entries", "back", false},
	} {
		if has(c.script, c.name) != c.want {
			t.Errorf("%s carries %s: %v, want %v", c.script, c.name, !c.want, c.want)
		}
	}
}

func assembleName(lib []libDef, name string) string {
	for _, s := range scriptTable {
		if s.name == name {
			var cs []luaConst
			if s.consts != nil {
				cs = s.consts()
			}
			return assemble(lib, name, s.prefix, slices.Concat(luaShared, cs))
		}
	}
	panic("no script " + name)
}

// definedAt returns where code defines the top-level local name, or -1.
func definedAt(code, name string) int {
	re := regexp.MustCompile(`(?m)^local (?:function )?(?:[A-Za-z_]\w*, *)*` + name + `\b`)
	if loc := re.FindStringIndex(code); loc != nil {
		return loc[0]
	}
	return -1
}

// definesLocal reports whether code (a script's body) has a local of its
// own called name (which then shadows a shared one).
func definesLocal(code, name string) bool {
	return regexp.MustCompile(`local (?:function )?(?:[A-Za-z_]\w*, *)*` + name + `\b`).MatchString(code)
}

// firstUse returns where code first refers to name other than defining it
// at the top level, or -1.
func firstUse(code, name string) int {
	for _, loc := range luaIdent.FindAllStringIndex(code, -1) {
		if code[loc[0]:loc[1]] != name || loc[0] > 0 && (code[loc[0]-1] == '.' || code[loc[0]-1] == ':') {
			continue
		}
		line := code[strings.LastIndexByte(code[:loc[0]], '\n')+1 : loc[0]]
		if strings.HasPrefix(line, "local ") && !strings.Contains(line, "=") {
			continue // its definition
		}
		return loc[0]
	}
	return -1
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestTakeProtocol sends a one-debit take and checks the ARGV and KEYS it
// put on the wire, position by position, against protocol.go's names (the
// positions the scripts are generated with): take.go's order and the
// table cannot drift apart. It then runs a script made of the take
// script's generated constants and checks Lua reads each name where Go
// puts it.
func TestTakeProtocol(t *testing.T) {
	c := redistest.Client(t)
	var sent []any
	if rc, ok := c.(*redis.Client); ok {
		rc.AddHook(redistest.Hook{Process: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
			if a := cmd.Args(); len(a) > 0 && (a[0] == "evalsha" || a[0] == "eval") && sent == nil {
				sent = slices.Clone(a)
			}
			return next(ctx, cmd)
		}})
	} else {
		t.Fatalf("client %T takes no hook", c)
	}
	prefix := redistest.Prefix(t)
	st := New(c, WithPrefix(prefix))
	at := time.Date(2026, 5, 5, 10, 30, 0, 0, time.UTC)
	b := quota.Budget{Name: "units", Limit: 77, Window: quota.Daily(time.UTC)}
	req := &backend.TakeRequest{API: "yt", Owner: "o", Nonce: "n1", Now: at, Method: "m", Job: "j",
		Hold: 3 * time.Second, Debits: []backend.Debit{{Budget: b, Cost: 5}}}
	if _, err := st.Take(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 3+takeKeys+takeArgs {
		t.Fatalf("sent %d values, want EVALSHA SHA NUMKEYS, %d KEYS, %d ARGV: %v", len(sent), takeKeys, takeArgs, sent)
	}
	keys, args := sent[3:3+takeKeys], sent[3+takeKeys:]
	day := time.Date(2026, 5, 5, 0, 0, 0, 0, time.UTC)
	want := map[string]string{
		"NOW": fmt.Sprint(at.UnixMicro()), "NONCE": "n1", "SEEN": "0", "SEEN_UNTIL": "0", "TRUST": "0",
		"HOLD": fmt.Sprint((3 * time.Second).Microseconds()), "NAME": "units", "COST": "5", "LIMIT": "77",
		"WIN": "0", "B2": fmt.Sprint(day.UnixMicro()), "B3": fmt.Sprint(day.AddDate(0, 0, 1).UnixMicro()),
		"FIELD": backend.BreakdownField("units", "m", "j"), "WBUCKET": st.own, "OWN": "0",
		"KEEP": fmt.Sprint(backend.BreakdownKeep(b.Window).Microseconds()),
	}
	for name, w := range want {
		if got := fmt.Sprint(args[takeArg(name)]); got != w {
			t.Errorf("ARGV %s (at %d) is %q, want %q", name, takeArg(name)+1, got, w)
		}
	}
	wantKeys := map[string]string{"LOG": ":log:units", "SUM": ":sum:units", "EXH": ":exh:units", "MARK": "mark"}
	for name, w := range wantKeys {
		k := fmt.Sprint(keys[slices.Index(takeKeyNames, name)])
		if !strings.HasPrefix(k, prefix) || !strings.Contains(k, w) {
			t.Errorf("KEYS %s is %q, want one with %q", name, k, w)
		}
	}
	// the constants as Lua reads them: take's own (A_x, A_DEBIT + D_x,
	// the tail's from the end) and decide's (S_x, P_x), each where Go
	// puts the argument
	var exprs, wants []string
	for _, n := range takeOne {
		exprs, wants = append(exprs, luaPosition(n)), append(wants, n)
	}
	for _, n := range batchShared {
		exprs, wants = append(exprs, "S_"+n), append(wants, n)
	}
	for _, n := range batchPerCall {
		exprs, wants = append(exprs, "P_"+n), append(wants, n)
	}
	for _, n := range takeKeyNames {
		exprs, wants = append(exprs, "K_"+n), append(wants, "key "+n)
	}
	src := preamble(slices.Concat(luaShared, takeConstants()), allNames()) +
		"return {" + strings.Join(exprs, ", ") + "}"
	v, err := c.Eval(context.Background(), src, nil).Int64Slice()
	if err != nil {
		t.Fatal(err, "\n", src)
	}
	for i, n := range wants {
		want := int64(0)
		if k, ok := strings.CutPrefix(n, "key "); ok {
			want = int64(slices.Index(takeKeyNames, k) + 1)
		} else {
			want = int64(takeArg(n) + 1)
		}
		if v[i] != want {
			t.Errorf("Lua's %s is %d, Go puts %s at %d", exprs[i], v[i], n, want)
		}
	}
}

// luaPosition returns the Lua expression for where take.lua's generated
// constants put the one-debit argument n (1-based).
func luaPosition(n string) string {
	switch {
	case slices.Contains(takeHead, n):
		return "A_" + n
	case slices.Contains(takeTail, n):
		return fmt.Sprintf("%d + A_%s", len(takeOne), n)
	}
	return "A_DEBIT + D_" + n
}

// allNames is every generated constant name, for preamble to emit them all.
func allNames() string {
	var b strings.Builder
	for _, c := range slices.Concat(luaShared, takeConstants()) {
		b.WriteString(c.name + " ")
	}
	return b.String()
}
