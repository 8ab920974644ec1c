package cli

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// escapingWriter writes what a command prints with every control character
// but newline and tab (and every bidirectional-text override) shown escaped,
// as \x1b or \u202e: a label or job name recorded by any program sharing the
// store reaches the terminal as text, never as an escape sequence that could
// move the cursor, rewrite the screen or reorder what is shown. JSON output
// has no such characters left to escape: encoding/json escapes them.
type escapingWriter struct{ w io.Writer }

func (e escapingWriter) Write(p []byte) (int, error) {
	clean := true
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRune(p[i:])
		if mustEscape(r, n) {
			clean = false
			break
		}
		i += n
	}
	if clean {
		return e.w.Write(p)
	}
	if _, err := io.WriteString(e.w, escapeText(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// mustEscape reports whether rune r (n bytes long) is unsafe on a terminal.
func mustEscape(r rune, n int) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r == utf8.RuneError && n == 1:
		return false // a byte that is not UTF-8: terminals show it as such
	case unicode.IsControl(r):
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true // bidirectional overrides, isolates and marks
	}
	return false
}

// escapeText returns s with the characters mustEscape names escaped.
func escapeText(s string) string {
	out := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case !mustEscape(r, n):
			out = append(out, s[i:i+n]...)
		case r < 0x100:
			out = fmt.Appendf(out, `\x%02x`, r)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += n
	}
	return string(out)
}

// checkLabel refuses a label holding control characters: it would print
// raw on every operator's terminal. what names the argument ("--label").
func checkLabel(what, label string) error {
	for i := 0; i < len(label); {
		r, n := utf8.DecodeRuneInString(label[i:])
		if mustEscape(r, n) || r == '\n' || r == '\t' {
			return usageErrorf("%s %q: control characters are not allowed in a label", what, label)
		}
		i += n
	}
	return nil
}

// cellEscaper shows a tab, newline or carriage return inside one cell as
// text: a label a program recorded with one (the library takes any label)
// would otherwise split the cell into two columns or the row into two
// lines of the tab-separated output that cut and awk read.
var cellEscaper = strings.NewReplacer("\t", `\x09`, "\n", `\x0a`, "\r", `\x0d`)

// joinCells joins a row's cells with tabs, each cell's own tabs and line
// breaks escaped.
func joinCells(cells []string) string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = cellEscaper.Replace(c)
	}
	return strings.Join(out, "\t")
}
