package cli

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/quotactl/quotactl/internal/view"
	"github.com/quotactl/quotactl/quota"
)

// statusRow is one line of `quotactl status`: who the budget is kept for
// (the identity columns, such as the credential), the budget and its usage.
type statusRow struct {
	API string
	Who []string // one cell per identity column of the table
	// Brief is the identity in one cell, for narrow layouts (the owner,
	// or the credential that is its own owner); empty: Who joined.
	Brief  string
	Budget string
	Usage  quota.Usage
	// Unit is the budget's unit (view.Status.Unit).
	Unit string
	// Whole is a budget nothing was charged to yet: no next-free time.
	Whole bool
}

// amounts are the USED and LEFT cells of r: "1,234 / 30,000 tokens" and
// "28,766 tokens", dollars for micro-dollars; in the default unit, bare
// numbers as before units ("9600/10000", "400").
func (r statusRow) amounts() (used, left string) {
	u := r.Usage
	return usedOfText(u.Used, u.Limit, r.Unit), amountText(u.Remaining, r.Unit)
}

// statusTable collects status rows and prints them to fit the terminal.
type statusTable struct {
	who   []string // headers of the identity columns, between API and BUDGET
	brief string   // header of the one identity column of narrow layouts; empty: who joined
	rows  []statusRow
}

func (t *statusTable) add(r statusRow) { t.rows = append(t.rows, r) }

// sort orders rows by api, identity columns (owner, label) and budget.
func (t *statusTable) sort() {
	slices.SortStableFunc(t.rows, func(a, b statusRow) int {
		return cmp.Or(cmp.Compare(a.API, b.API), slices.Compare(a.Who, b.Who), cmp.Compare(a.Budget, b.Budget))
	})
}

// usageBar draws u as [#####-----] with width cells inside: rounded down
// like the percentage beside it, at least one cell once anything is used,
// and full only when nothing is left (used up, or marked spent).
func usageBar(u quota.Usage, width int) string {
	n := 0
	switch {
	case view.Spent(u):
		n = width
	case u.Limit > 0:
		n = int(max(u.Used, 0) * int64(width) / u.Limit)
		if u.Used > 0 && n == 0 {
			n = 1 // something was used: show it
		}
		n = min(n, width-1)
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat("-", width-n) + "]"
}

// usageText is the bar and the percentage: "[#########-]  96%", or
// "[##########] spent" for a budget marked spent (which is 100% in JSON).
func usageText(u quota.Usage, width int) string {
	pct := strconv.FormatInt(view.Percent(u), 10) + "%"
	if !u.ExhaustedUntil.IsZero() {
		pct = "spent"
	}
	return fmt.Sprintf("%s %4s", usageBar(u, width), pct)
}

// statusLayout is one way of printing the table, from the widest to the
// narrowest.
type statusLayout struct {
	bar      int  // cells inside the usage bar
	absolute bool // times with their date, and a SPENT UNTIL column
	reset    bool // "reset in 4h" rather than "in 4h" for daily and monthly budgets
	cut      int  // identity cells cut to this many characters (0: never)
	brief    bool // one identity column (statusRow.Brief)
	compact  bool // two lines per budget
}

var statusLayouts = []statusLayout{
	{bar: 20, absolute: true, reset: true},
	{bar: 20, reset: true},
	{bar: 10, reset: true},
	{bar: 10, reset: true, brief: true},
	{bar: 10, brief: true},
	{bar: 10, brief: true, cut: 16},
	{bar: 10, brief: true, cut: 12},
	{bar: 8, brief: true, cut: 8},
	{bar: 10, compact: true, cut: 24},
}

// width is the terminal's width in columns: $COLUMNS, else IO.Width, else
// 80.
func (g *globals) width() int {
	if v, ok := g.env("COLUMNS"); ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
			return n
		}
	}
	if g.io.Width > 0 {
		return g.io.Width
	}
	return 80
}

// printStatus prints the table: on a terminal, in the widest layout that
// fits its width; piped, tab-separated with full times (for cut and awk).
func (g *globals) printStatus(w io.Writer, t *statusTable) error {
	t.sort()
	if !g.io.TTY {
		for _, r := range t.rows {
			if _, err := fmt.Fprintln(w, joinCells(g.statusCells(r, statusLayouts[0]))); err != nil {
				return err
			}
		}
		return nil
	}
	width := g.width()
	for _, l := range statusLayouts {
		if l.compact {
			return g.printCompact(w, t, l, width)
		}
		header, rows := g.statusGrid(t, l)
		if gridWidth(header, rows) <= width {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, joinCells(header))
			for _, r := range rows {
				fmt.Fprintln(tw, joinCells(r))
			}
			return tw.Flush()
		}
	}
	return nil
}

// statusGrid is the header and cells of the table in layout l.
func (g *globals) statusGrid(t *statusTable, l statusLayout) ([]string, [][]string) {
	who := t.who
	if l.brief {
		who = []string{cmp.Or(t.brief, strings.Join(t.who, " "))}
	}
	header := append(append([]string{"API"}, who...), "BUDGET", "USED", "LEFT", "USAGE", "NEXT FREE")
	marked := l.absolute
	for _, r := range t.rows {
		marked = marked || !r.Usage.ExhaustedUntil.IsZero()
	}
	if marked && l.bar == 20 {
		header = append(header, "SPENT UNTIL")
	}
	var rows [][]string
	for _, r := range t.rows {
		cells := g.statusCells(r, l)
		if !(marked && l.bar == 20) {
			cells = cells[:len(cells)-1]
		}
		rows = append(rows, cells)
	}
	return header, rows
}

// statusCells is one row's cells in layout l, SPENT UNTIL last.
func (g *globals) statusCells(r statusRow, l statusLayout) []string {
	u := r.Usage
	cells := []string{r.API}
	if l.brief {
		cells = append(cells, cut(cmp.Or(r.Brief, strings.Join(r.Who, " ")), l.cut))
	} else {
		for _, c := range r.Who {
			cells = append(cells, cut(c, l.cut))
		}
	}
	next, until := "-", "-"
	if !r.Whole {
		next, until = g.nextFreeIn(u, l), g.spentUntilIn(u, l)
	}
	if l.bar < 20 && until != "-" {
		// No SPENT UNTIL column: USAGE says "spent", and the mark's end
		// is when capacity returns.
		next = until
	}
	used, left := r.amounts()
	return append(cells, r.Budget, used, left, usageText(u, l.bar), next, until)
}

func (g *globals) nextFreeIn(u quota.Usage, l statusLayout) string {
	if l.absolute {
		return g.nextFree(u)
	}
	switch {
	case u.Window.IsCalendar() && l.reset:
		return "reset " + relative(u.Window.NextReset(g.now()).Sub(g.now()))
	case u.Window.IsCalendar():
		return relative(u.Window.NextReset(g.now()).Sub(g.now()))
	case u.Reset.IsZero():
		return "-"
	}
	return relative(u.Reset.Sub(g.now()))
}

func (g *globals) spentUntilIn(u quota.Usage, l statusLayout) string {
	if l.absolute {
		return g.spentUntil(u)
	}
	if u.ExhaustedUntil.IsZero() {
		return "-"
	}
	if u.StoreLoss {
		return relative(u.ExhaustedUntil.Sub(g.now())) + " (store loss)"
	}
	return relative(u.ExhaustedUntil.Sub(g.now()))
}

// printCompact prints a line per budget and its usage below, wrapped to the
// width, for narrow terminals:
//
//	youtube/units  yt-key-1
//	  [#########-]  97%  9700/10000, 300 left, reset in 4h48m
func (g *globals) printCompact(w io.Writer, t *statusTable, l statusLayout, width int) error {
	for _, r := range t.rows {
		who := cut(cmp.Or(r.Brief, strings.Join(r.Who, " ")), l.cut)
		cells := g.statusCells(r, l)
		used, left := r.amounts()
		parts := []string{usageText(r.Usage, l.bar), used, left + " left"}
		if next := cells[len(cells)-2]; next != "-" {
			parts = append(parts, next)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s/%s  %s\n", r.API, r.Budget, who)
		line := "  " + parts[0]
		for i, p := range parts[1:] {
			sep := ", "
			if i == 0 {
				sep = "  "
			}
			if utf8.RuneCountInString(line)+len(sep)+utf8.RuneCountInString(p) > width {
				b.WriteString(line + "\n")
				line = "  " + p
				continue
			}
			line += sep + p
		}
		b.WriteString(line + "\n")
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// gridWidth is how wide tabwriter prints header and rows with a padding of
// two spaces.
func gridWidth(header []string, rows [][]string) int {
	ws := make([]int, len(header))
	for i, h := range header {
		ws[i] = utf8.RuneCountInString(h)
	}
	for _, r := range rows {
		for i, c := range r {
			ws[i] = max(ws[i], utf8.RuneCountInString(c))
		}
	}
	total := 2 * (len(ws) - 1)
	for _, n := range ws {
		total += n
	}
	return total
}

// cut shortens s to n characters, ending in "…" (n <= 0: as is).
func cut(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// wrap breaks text into lines of at most width characters at spaces (a
// word longer than the width stands alone), each ending in a newline.
func wrap(text string, width int) string {
	var b, line strings.Builder
	for _, w := range strings.Fields(text) {
		if line.Len() > 0 && utf8.RuneCountInString(line.String())+1+utf8.RuneCountInString(w) > width {
			b.WriteString(line.String() + "\n")
			line.Reset()
		}
		if line.Len() > 0 {
			line.WriteByte(' ')
		}
		line.WriteString(w)
	}
	if line.Len() > 0 {
		b.WriteString(line.String() + "\n")
	}
	return b.String()
}

// printFitted prints a table to fit the terminal, as status does. Piped, the
// rows of the first layout, tab-separated without a header (full times, for
// cut and awk). On a terminal, aligned under header: the first of layouts
// (each the rows in one form, from the widest) that fits the width, as it is
// or without the columns that are "-" in every row; else one block per row
// of the last layout: its first cell on a line, and below it each other
// cell that is not "-" as "  header: value", wrapped to the width.
func (g *globals) printFitted(w io.Writer, header []string, layouts ...[][]string) error {
	if !g.io.TTY {
		for _, r := range layouts[0] {
			if _, err := fmt.Fprintln(w, joinCells(r)); err != nil {
				return err
			}
		}
		return nil
	}
	width := g.width()
	aligned := func(header []string, rows [][]string) error {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, joinCells(header))
		for _, r := range rows {
			fmt.Fprintln(tw, joinCells(r))
		}
		return tw.Flush()
	}
	for _, rows := range layouts {
		if gridWidth(header, rows) <= width {
			return aligned(header, rows)
		}
		if h, rs := dropEmptyColumns(header, rows); gridWidth(h, rs) <= width {
			return aligned(h, rs)
		}
	}
	rows := layouts[len(layouts)-1]
	var b strings.Builder
	for _, r := range rows {
		b.WriteString(wrapHanging("", r[0], width, "  "))
		for i, c := range r[1:] {
			if c != "-" {
				b.WriteString(wrapHanging("  "+strings.ToLower(header[i+1])+": ", c, width, "    "))
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// dropEmptyColumns returns header and rows without the columns (but the
// first) that are "-" in every row.
func dropEmptyColumns(header []string, rows [][]string) ([]string, [][]string) {
	keep := []int{0}
	for i := 1; i < len(header); i++ {
		for _, r := range rows {
			if r[i] != "-" {
				keep = append(keep, i)
				break
			}
		}
	}
	pick := func(cells []string) []string {
		out := make([]string, len(keep))
		for j, i := range keep {
			out[j] = cells[i]
		}
		return out
	}
	out := make([][]string, len(rows))
	for k, r := range rows {
		out[k] = pick(r)
	}
	return pick(header), out
}

// wrapHanging writes prefix and text in lines of at most width characters,
// broken at spaces, the lines after the first indented by indent; a word
// longer than a line is split. Each line ends in a newline.
func wrapHanging(prefix, text string, width int, indent string) string {
	var b strings.Builder
	line := []rune(prefix)
	fresh := true // nothing of text on the line yet
	flush := func() {
		b.WriteString(strings.TrimRight(string(line), " ") + "\n")
		line, fresh = []rune(indent), true
	}
	for _, word := range strings.Fields(text) {
		wr := []rune(word)
		sep := 1
		if fresh {
			sep = 0
		}
		if !fresh && len(line)+sep+len(wr) > width {
			flush()
			sep = 0
		}
		if sep == 1 {
			line = append(line, ' ')
		}
		for len(line)+len(wr) > width && width > len(indent)+1 {
			// Longer than a whole line: split it.
			n := max(width-len(line), 1)
			line = append(line, wr[:n]...)
			wr = wr[n:]
			flush()
		}
		line = append(line, wr...)
		fresh = false
	}
	if !fresh {
		b.WriteString(strings.TrimRight(string(line), " ") + "\n")
	}
	return b.String()
}
