package quotactl_test

// The README and the guides in docs/ show code; this test keeps every block
// of it true. Each fenced block names its language, and:
//
//   - go: its lines, whitespace aside, are consecutive lines of the body of
//     an Example function (with an output comment, so go test runs it) in
//     one of the repository's _test.go files;
//   - sh, bash, console: each command (console: the lines after "$ ") is a
//     command a test runs or checks: quotactl command lines are listed in
//     cmd/quotactl/internal/cli/testdata/doc-commands.txt, which
//     TestDocCommandsParse there parses with the real cobra command tree;
//     go run/test/install name packages that exist, -run and -bench match
//     tests that exist, and program or test flags are ones the package
//     defines; cd names a directory; python3 runs a script of the
//     repository; environment variables are ones the code reads;
//   - yaml, json: a cost table (costs.Parse loads it) or Prometheus rules
//     whose every quota_* series is one promquota exports;
//   - text: a map of the repository: every path it names exists, and every
//     package directory down to two levels is on it.
//
// Links to files and headings resolve. A block that fits none of these
// fails the test.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/promquota"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite cmd/quotactl/internal/cli/testdata/doc-commands.txt from the docs")

// docCommandsFile lists the quotactl command lines the docs show, one JSON
// array of arguments a line; the cli package's test parses each.
const docCommandsFile = "cmd/quotactl/internal/cli/testdata/doc-commands.txt"

// docBlock is one fenced code block of a markdown file.
type docBlock struct {
	file string // path from the repository root
	line int    // of the opening fence
	lang string
	text string
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d (```%s)", b.file, b.line, b.lang) }

// docFiles returns README.md and docs/*.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no guides in docs/")
	}
	return append([]string{"README.md"}, files...)
}

// docBlocks returns a markdown file's fenced blocks and its text outside
// them. A fence starts a line; an indented one is an error (it would hide
// a block from this test).
func docBlocks(t *testing.T, file string) (blocks []docBlock, prose string) {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cur *docBlock
	var body, outside strings.Builder
	for i, line := range strings.Split(string(src), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &docBlock{file: file, line: i + 1, lang: strings.TrimSpace(strings.TrimPrefix(line, "```"))}
			body.Reset()
		case cur != nil && line == "```":
			cur.text = body.String()
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(line + "\n")
		case strings.HasPrefix(strings.TrimLeft(line, " \t"), "```"):
			t.Errorf("%s:%d: an indented code fence: start fences at the beginning of the line", file, i+1)
		default:
			outside.WriteString(line + "\n")
		}
	}
	if cur != nil {
		t.Errorf("%s:%d: code block never closed", file, cur.line)
	}
	return blocks, outside.String()
}

// repoIndex is what the checks look things up in, read once.
type repoIndex struct {
	examples  map[string][]string // "file:ExampleX" -> body lines, normalised
	testFuncs map[string][]string // package dir -> Test/Benchmark/Example/Fuzz names
	testFlags map[string][]string // package dir -> flags its tests define
	progFlags map[string][]string // main package dir -> flags it defines
	mainPkgs  map[string]bool     // package dir -> is package main
	goDirs    map[string]bool     // dirs holding .go files
	literals  map[string]bool     // every string literal in the repository's Go code
}

// normLines returns s's non-blank lines, trimmed, inner runs of blanks made
// one space.
func normLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			out = append(out, strings.Join(f, " "))
		}
	}
	return out
}

// flagName returns the flag a call such as flag.Bool("name", ...) or
// flag.StringVar(&v, "name", ...) defines, if call is one.
func flagName(call *ast.CallExpr) (string, bool) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	if id, ok := sel.X.(*ast.Ident); !ok || id.Name != "flag" {
		return "", false
	}
	arg := 0
	if strings.HasSuffix(sel.Sel.Name, "Var") {
		arg = 1
	}
	if len(call.Args) <= arg {
		return "", false
	}
	lit, ok := call.Args[arg].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

func indexRepo(t *testing.T) *repoIndex {
	t.Helper()
	ix := &repoIndex{
		examples:  map[string][]string{},
		testFuncs: map[string][]string{},
		testFlags: map[string][]string{},
		progFlags: map[string][]string{},
		mainPkgs:  map[string]bool{},
		goDirs:    map[string]bool{},
		literals:  map[string]bool{},
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(p))
		ix.goDirs[dir] = true
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, p, src, parser.ParseComments)
		if err != nil {
			return err
		}
		test := strings.HasSuffix(p, "_test.go")
		if !test && f.Name.Name == "main" {
			ix.mainPkgs[dir] = true
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if s, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING {
					ix.literals[s] = true
				}
			case *ast.CallExpr:
				if name, ok := flagName(n); ok {
					if test {
						ix.testFlags[dir] = append(ix.testFlags[dir], name)
					} else {
						ix.progFlags[dir] = append(ix.progFlags[dir], name)
					}
				}
			}
			return true
		})
		if !test {
			return nil
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil {
				continue
			}
			name := fn.Name.Name
			for _, prefix := range []string{"Test", "Benchmark", "Example", "Fuzz"} {
				if strings.HasPrefix(name, prefix) {
					ix.testFuncs[dir] = append(ix.testFuncs[dir], name)
				}
			}
			if !strings.HasPrefix(name, "Example") || fn.Body == nil {
				continue
			}
			hasOutput := false
			for _, cg := range f.Comments {
				if cg.Pos() > fn.Body.Lbrace && cg.End() < fn.Body.Rbrace {
					text := strings.TrimSpace(cg.Text())
					if strings.HasPrefix(text, "Output:") || strings.HasPrefix(text, "Unordered output:") {
						hasOutput = true
					}
				}
			}
			if !hasOutput {
				continue // compiled, never run: not a tested Example
			}
			body := string(src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset])
			ix.examples[filepath.ToSlash(p)+":"+name] = normLines(body)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// TestDocs checks every code block and link of README.md and docs/*.md.
func TestDocs(t *testing.T) {
	ix := indexRepo(t)
	var quotactlLines []string
	for _, file := range docFiles(t) {
		blocks, prose := docBlocks(t, file)
		checkLinks(t, file, prose)
		for _, b := range blocks {
			switch b.lang {
			case "go":
				checkGoBlock(t, ix, b)
			case "sh", "bash", "console":
				for _, args := range checkCommandBlock(t, ix, b) {
					j, err := json.Marshal(args)
					if err != nil {
						t.Fatal(err)
					}
					quotactlLines = append(quotactlLines, string(j))
				}
			case "yaml", "json":
				checkDataBlock(t, b)
			case "text":
				checkMapBlock(t, ix, b)
			default:
				t.Errorf("%s: a block in no language this test checks (go, sh, bash, console, yaml, json, text)", b)
			}
		}
	}

	slices.Sort(quotactlLines)
	quotactlLines = slices.Compact(quotactlLines)
	want := "# quotactl command lines the docs show, one JSON array of arguments a line.\n" +
		"# Written by go test -run TestDocs -update-docs at the repository root;\n" +
		"# TestDocCommandsParse parses each with the real command tree.\n" +
		strings.Join(quotactlLines, "\n") + "\n"
	if *updateDocs {
		if err := os.WriteFile(docCommandsFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(docCommandsFile)
	if err != nil {
		t.Fatalf("%v (go test -run TestDocs -update-docs writes it)", err)
	}
	if string(got) == want {
		return
	}
	var diff []string
	gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(want, "\n")
	for _, l := range wantLines {
		if !slices.Contains(gotLines, l) {
			diff = append(diff, "docs show:  quotactl "+l)
		}
	}
	for _, l := range gotLines {
		if !slices.Contains(wantLines, l) {
			diff = append(diff, "not shown:  quotactl "+l)
		}
	}
	t.Errorf("%s is not the quotactl command lines the docs show (go test -run TestDocs -update-docs rewrites it; then go test ./cmd/quotactl/internal/cli checks them):\n%s", docCommandsFile, strings.Join(diff, "\n"))
}

// checkGoBlock: the block's lines are consecutive lines of a tested Example.
func checkGoBlock(t *testing.T, ix *repoIndex, b docBlock) {
	t.Helper()
	want := normLines(b.text)
	if len(want) == 0 {
		t.Errorf("%s: empty", b)
		return
	}
	best, bestName := 0, ""
	for name, body := range ix.examples {
		for i := range body {
			n := 0
			for n < len(want) && i+n < len(body) && body[i+n] == want[n] {
				n++
			}
			if n == len(want) {
				return
			}
			if n > best {
				best, bestName = n, name
			}
		}
	}
	if bestName == "" {
		t.Errorf("%s: no tested Example (func Example... with an output comment) holds this code; its first line is\n\t%s", b, want[0])
		return
	}
	t.Errorf("%s: not the code of a tested Example: the closest, %s, agrees for %d lines, then has not\n\t%s", b, bestName, best, want[best])
}

// command is one simple command of a shell line.
type command struct {
	env  []string // NAME=VALUE assignments before it
	args []string
}

// shellSplit splits a command line into simple commands: words (with '...'
// and "..." quoting), separated by ;, &&, || and |; redirections and
// comments are dropped. What it does not know (command substitution,
// compound commands) is an error.
func shellSplit(line string) ([]command, error) {
	var cmds []command
	var cur command
	var word strings.Builder
	inWord := false
	endWord := func() {
		if !inWord {
			return
		}
		w := word.String()
		word.Reset()
		inWord = false
		if len(cur.args) == 0 && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(w) {
			cur.env = append(cur.env, w)
			return
		}
		cur.args = append(cur.args, w)
	}
	endCmd := func() error {
		endWord()
		if len(cur.args) == 0 {
			if len(cur.env) > 0 {
				return fmt.Errorf("an assignment without a command: use export")
			}
			return fmt.Errorf("an empty command")
		}
		cmds = append(cmds, cur)
		cur = command{}
		return nil
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(line[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unclosed quote")
			}
			q := line[i+1 : i+1+j]
			if c == '"' && strings.ContainsAny(q, "`\\") || strings.Contains(q, "$(") {
				return nil, fmt.Errorf("a quoted string this test does not read: %s", q)
			}
			word.WriteString(q)
			inWord = true
			i += j + 1
		case c == ' ' || c == '\t':
			endWord()
		case c == '#' && !inWord:
			i = len(line)
		case c == '`' || strings.HasPrefix(line[i:], "$(") || c == '(' || c == ')' || c == '\\' || c == '&' && !strings.HasPrefix(line[i:], "&&"):
			return nil, fmt.Errorf("shell syntax this test does not read at %q", line[i:])
		case strings.HasPrefix(line[i:], "&&") || strings.HasPrefix(line[i:], "||"):
			if err := endCmd(); err != nil {
				return nil, err
			}
			i++
		case c == ';' || c == '|':
			if err := endCmd(); err != nil {
				return nil, err
			}
		case c == '>' || c == '<' || (c >= '0' && c <= '9' && !inWord && i+1 < len(line) && line[i+1] == '>'):
			// A redirection: drop it and its target.
			endWord()
			for i < len(line) && strings.IndexByte("0123456789<>&", line[i]) >= 0 {
				i++
			}
			for i < len(line) && line[i] == ' ' {
				i++
			}
			for i < len(line) && line[i] != ' ' && line[i] != ';' && line[i] != '|' && line[i] != '&' {
				i++
			}
			i--
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if err := endCmd(); err != nil {
		return nil, err
	}
	for _, c := range cmds {
		switch c.args[0] {
		case "while", "until", "for", "do", "done", "if", "then", "else", "fi", "case", "esac":
			return nil, fmt.Errorf("compound commands are not read by this test (%s)", c.args[0])
		}
	}
	return cmds, nil
}

// commandLines returns a block's command lines: console's after "$ " (with
// "> " continuations), every line of sh and bash but comments; a line
// ending in a backslash continues on the next.
func commandLines(b docBlock) (lines []string, err error) {
	var cur string
	more := false
	for _, l := range strings.Split(strings.TrimSuffix(b.text, "\n"), "\n") {
		if b.lang == "console" {
			switch {
			case more && strings.HasPrefix(l, "> "):
				l = strings.TrimPrefix(l, "> ")
			case more:
				return nil, fmt.Errorf("a command continued with a backslash, then no \"> \" line")
			case strings.HasPrefix(l, "$ "):
				l = strings.TrimPrefix(l, "$ ")
			default:
				continue // output
			}
		} else if !more && (strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#")) {
			continue
		}
		cur += l
		more = strings.HasSuffix(l, "\\")
		if more {
			cur = strings.TrimSuffix(cur, "\\")
			continue
		}
		lines = append(lines, cur)
		cur = ""
	}
	if more {
		return nil, fmt.Errorf("the last command ends with a backslash")
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("no command (a console block shows commands after \"$ \")")
	}
	return lines, nil
}

// systemEnv are variables the system reads, not this repository's code.
var systemEnv = map[string]bool{"TZ": true, "HOME": true, "PATH": true}

// checkCommandBlock checks each command of a sh, bash or console block and
// returns the arguments of its quotactl commands.
func checkCommandBlock(t *testing.T, ix *repoIndex, b docBlock) (quotactl [][]string) {
	t.Helper()
	lines, err := commandLines(b)
	if err != nil {
		t.Errorf("%s: %v", b, err)
		return nil
	}
	// Variables a command of the block reads as a credential.
	credVars := map[string]bool{}
	for _, m := range regexp.MustCompile(`--(?:credential|api-key)-env[ =]([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(b.text, -1) {
		credVars[m[1]] = true
	}
	checkEnv := func(line, assignment string) {
		name, _, _ := strings.Cut(assignment, "=")
		if !ix.literals[name] && !systemEnv[name] && !credVars[name] {
			t.Errorf("%s: %q: no code reads $%s", b, line, name)
		}
	}
	cwd := "."
	for _, line := range lines {
		cmds, err := shellSplit(line)
		if err != nil {
			t.Errorf("%s: %q: %v", b, line, err)
			continue
		}
		for _, c := range cmds {
			for _, e := range c.env {
				checkEnv(line, e)
			}
			switch c.args[0] {
			case "quotactl":
				quotactl = append(quotactl, c.args[1:])
			case "go":
				if err := checkGoCommand(ix, cwd, c.args[1:]); err != nil {
					t.Errorf("%s: %q: %v", b, line, err)
				}
			case "cd":
				if len(c.args) != 2 {
					t.Errorf("%s: %q: cd takes one directory", b, line)
					continue
				}
				dir := path.Join(cwd, c.args[1])
				if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
					t.Errorf("%s: %q: no directory %s", b, line, dir)
				}
				cwd = dir
			case "export":
				for _, a := range c.args[1:] {
					checkEnv(line, a)
				}
			case "read", "echo", "cat":
				// the shell's own
			case "python3":
				// A script of the repository that a test runs (proxy's
				// python_test.go runs those of proxy/testdata).
				if len(c.args) < 2 || !strings.HasSuffix(c.args[1], ".py") {
					t.Errorf("%s: %q: python3 runs a script of the repository", b, line)
				} else if _, err := os.Stat(path.Join(cwd, c.args[1])); err != nil {
					t.Errorf("%s: %q: %v", b, line, err)
				}
			case ".ci/run", "./.ci/run":
				if _, err := os.Stat(path.Join(cwd, c.args[0])); err != nil {
					t.Errorf("%s: %q: %v", b, line, err)
				}
			default:
				t.Errorf("%s: %q: %s is not a command any test runs (quotactl, go, cd, export, read, echo, cat, python3, .ci/run)", b, line, c.args[0])
			}
		}
	}
	return quotactl
}

// goTestValueFlags are go test's (and go build's) flags that take a value.
var goTestValueFlags = map[string]bool{
	"run": true, "bench": true, "benchtime": true, "count": true, "tags": true, "timeout": true,
	"cpu": true, "skip": true, "o": true, "coverprofile": true, "parallel": true, "exec": true,
}

// goBoolFlags are go test's and go build's flags that take none.
var goBoolFlags = map[string]bool{
	"v": true, "race": true, "short": true, "benchmem": true, "json": true, "failfast": true, "cover": true,
}

// checkGoCommand checks go run, go test and go install: their packages
// exist, -run and -bench match functions the packages' tests have, and the
// other flags are go's or ones the package defines.
func checkGoCommand(ix *repoIndex, cwd string, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("go with no command")
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "run", "test", "install", "build", "vet":
	default:
		return fmt.Errorf("go %s: not a go command the docs may show", sub)
	}
	var pkgs []string     // package dirs, from the repository root
	var patterns []string // the patterns as written
	var progArgs []string // go run: the program's arguments
	var other []string    // go test: flags that are not go's
	regexps := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if sub == "run" && len(patterns) > 0 {
			progArgs = args[i:]
			break
		}
		if strings.HasPrefix(a, "-") {
			name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			switch {
			case goTestValueFlags[name]:
				if !hasValue {
					if i+1 == len(args) {
						return fmt.Errorf("-%s needs a value", name)
					}
					i++
					value = args[i]
				}
				if name == "run" || name == "bench" || name == "skip" {
					regexps[name] = value
				}
			case goBoolFlags[name]:
			default:
				other = append(other, name)
			}
			continue
		}
		if !strings.HasPrefix(a, ".") {
			return fmt.Errorf("%q: name packages by path (./...)", a)
		}
		patterns = append(patterns, a)
		p := path.Join(cwd, a)
		if rest, ok := strings.CutSuffix(p, "..."); ok {
			base := strings.TrimSuffix(rest, "/")
			if base == "" {
				base = "."
			}
			var found []string
			for dir := range ix.goDirs {
				if base == "." || dir == base || strings.HasPrefix(dir, base+"/") {
					found = append(found, dir)
				}
			}
			if len(found) == 0 {
				return fmt.Errorf("%s matches no package", a)
			}
			pkgs = append(pkgs, found...)
			continue
		}
		if !ix.goDirs[p] {
			return fmt.Errorf("no package %s", a)
		}
		pkgs = append(pkgs, p)
	}
	if len(patterns) == 0 {
		if !ix.goDirs[cwd] {
			return fmt.Errorf("no package in %s", cwd)
		}
		pkgs = []string{cwd}
	}
	if (sub == "run" || sub == "install") && !ix.mainPkgs[pkgs[0]] {
		return fmt.Errorf("go %s %s: not a main package", sub, pkgs[0])
	}
	has := func(m map[string][]string, name string) bool {
		for _, d := range pkgs {
			if slices.Contains(m[d], name) {
				return true
			}
		}
		return false
	}
	for _, a := range progArgs {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !slices.Contains(ix.progFlags[pkgs[0]], name) {
			return fmt.Errorf("%s defines no flag -%s", pkgs[0], name)
		}
	}
	for _, name := range other {
		if sub != "test" || !has(ix.testFlags, name) {
			return fmt.Errorf("-%s is neither go %s's flag nor one the package's tests define", name, sub)
		}
	}
	for flagName, expr := range regexps {
		if expr == "^$" {
			continue // run nothing: benchmarks only
		}
		first, _, _ := strings.Cut(expr, "/")
		re, err := regexp.Compile(first)
		if err != nil {
			return fmt.Errorf("-%s %s: %v", flagName, expr, err)
		}
		matched := false
		for _, d := range pkgs {
			for _, fn := range ix.testFuncs[d] {
				if (flagName == "bench") == strings.HasPrefix(fn, "Benchmark") && re.MatchString(fn) {
					matched = true
				}
			}
		}
		if !matched {
			return fmt.Errorf("-%s %s matches no function of %v", flagName, expr, patterns)
		}
	}
	return nil
}

// promRules is the part of a Prometheus rules file the docs show.
type promRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// promSeries returns the names of the series promquota's collectors export.
func promSeries(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		promquota.New().Describe(ch)
		promquota.NewStoreCollector(quota.NewMemoryStore()).Describe(ch)
		close(ch)
	}()
	re := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for d := range ch {
		if m := re.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
			// A histogram's series.
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[m[1]+s] = true
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("promquota describes no series")
	}
	return names
}

// checkDataBlock: a cost table loads; Prometheus rules name real series.
func checkDataBlock(t *testing.T, b docBlock) {
	t.Helper()
	var top map[string]any
	var err error
	if b.lang == "json" {
		err = json.Unmarshal([]byte(b.text), &top)
	} else {
		err = yaml.Unmarshal([]byte(b.text), &top)
	}
	if err != nil {
		t.Errorf("%s: %v", b, err)
		return
	}
	switch {
	case top["api"] != nil:
		if _, err := costs.Parse("doc."+b.lang, []byte(b.text)); err != nil {
			t.Errorf("%s: a cost table that does not load: %v", b, err)
		}
	case top["groups"] != nil && b.lang == "yaml":
		var rules promRules
		dec := yaml.NewDecoder(strings.NewReader(b.text))
		dec.KnownFields(true)
		if err := dec.Decode(&rules); err != nil {
			t.Errorf("%s: Prometheus rules: %v", b, err)
			return
		}
		series := promSeries(t)
		n := 0
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				for _, name := range regexp.MustCompile(`\bquota_[a-z_]+\b`).FindAllString(r.Expr, -1) {
					n++
					if !series[name] {
						t.Errorf("%s: rule %s%s uses %s, which promquota does not export", b, r.Alert, r.Record, name)
					}
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: rules that use no quota series", b)
		}
	default:
		t.Errorf("%s: neither a cost table (api:) nor Prometheus rules (groups:)", b)
	}
}

// checkMapBlock: a map of the repository names paths that exist and every
// package directory down to two levels (quota/redisstore, examples/youtube).
func checkMapBlock(t *testing.T, ix *repoIndex, b docBlock) {
	t.Helper()
	listed := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(b.text, "\n"), "\n") {
		if l == "" || l[0] == ' ' || l[0] == '\t' {
			continue // a description's continuation
		}
		p := strings.Fields(l)[0]
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %s is on the map, not in the repository", b, p)
		}
		listed[strings.TrimSuffix(p, "/")] = true
	}
	if len(listed) == 0 {
		t.Errorf("%s: a text block is a map of the repository: one path a line", b)
		return
	}
	for dir := range ix.goDirs {
		if dir == "." || strings.Count(dir, "/") > 1 {
			continue
		}
		if !listed[dir] {
			t.Errorf("%s: package directory %s/ is not on the map", b, dir)
		}
	}
}

// checkLinks: relative links name files that exist, and headings that
// exist in them.
func checkLinks(t *testing.T, file, prose string) {
	t.Helper()
	re := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, m := range re.FindAllStringSubmatch(prose, -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		p, anchor, _ := strings.Cut(target, "#")
		if p == "" {
			p = file
		} else {
			p = path.Join(path.Dir(file), p)
		}
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: link %s: no file %s", file, target, p)
			continue
		}
		if anchor != "" && !slices.Contains(headingAnchors(t, p), anchor) {
			t.Errorf("%s: link %s: %s has no heading #%s", file, target, p, anchor)
		}
	}
}

// headingAnchors returns the anchors GitHub makes of a markdown file's
// headings.
func headingAnchors(t *testing.T, file string) []string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	seen := map[string]int{}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "```") {
			in = !in
		}
		if in || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#")))
		var a strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				a.WriteByte('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				a.WriteRune(r)
			}
		}
		s := a.String()
		if n := seen[s]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", s, n))
		} else {
			out = append(out, s)
		}
		seen[s]++
	}
	return out
}
