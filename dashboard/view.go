package dashboard

import (
	"cmp"
	"fmt"
	"html/template"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quotactl/quotactl/internal/humantime"
	"github.com/quotactl/quotactl/internal/view"
	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
)

// pageView is the whole page: the live part, or the error that kept it from
// being read.
type pageView struct {
	Main    *mainView
	Error   string
	Refresh int64 // ms between live refreshes
}

// mainView is the page's live part, re-sent on every change.
type mainView struct {
	Updated   string
	Zone      string
	Rows      []rowView
	Charts    []chartView
	Crossings []crossView
	Levels    string
	Jobs      []jobView
	JobsKept  bool
	Spent     int // budgets with nothing left
	Warn      int // budgets at or past the second-highest threshold
}

type rowView struct {
	API, Owner, OwnerTitle, Budget, Window string
	Creds                                  string // a named owner's credentials
	Unit                                   string // what Used, Limit and Remaining count (view.Amount shows them)
	Used, Limit, Remaining                 int64
	LimitFrom                              string // where the limit comes from: "program", "operator (owner)", ...
	Drift                                  int64  // units the upstream reported that the meter had not counted, this window
	LimitTitle                             string // LimitFrom said in full
	Percent                                int64  // shown number, 0..100
	PercentText                            string // "97%" or "spent"
	Fill                                   int64  // bar fill in percent: Percent, or 100 when spent
	State                                  string // ok, warn, high, spent
	ResetIn, ResetAt                       string
	SpentUntil                             string
	Anchor                                 string
}

// crossView is one budget's crossings, newest budget first.
type crossView struct {
	API, Owner, Budget string
	Levels             []levelView
	State              string // of the highest level
	Latest             string // when the highest level was crossed, relative
}

type levelView struct {
	Percent     int64
	At, Title   string
	Used, Limit int64
	State       string
}

type jobView struct {
	Job, Start, Ago, Took, Outcome, Detail string
	Spent                                  []spentView
	Charges                                int64
	Recent                                 []runView
	Checkpoint                             string
}

type spentView struct {
	Budget string
	Units  int64
	Unit   string // what Units counts (view.Amount shows it)
}

type runView struct {
	Outcome, Title string
}

// Chart geometry, in SVG user units.
const (
	chartW      = 640
	chartH      = 170
	chartLeft   = 52
	chartRight  = 10
	chartTop    = 10
	chartBottom = 24
	plotW       = chartW - chartLeft - chartRight
	plotH       = chartH - chartTop - chartBottom
	maxMethods  = 6 // methods drawn in their own colour; the rest are "other"
)

type chartView struct {
	Anchor, API, Owner, Budget, Zone, Window string
	Unit                                     string
	Used, Limit                              int64
	Percent                                  int64
	State                                    string
	W, H                                     int
	PlotLeft, PlotRight, PlotTop, PlotBottom float64
	Bars                                     []rectView
	XTicks, YTicks                           []tickView
	Cumulative                               string // SVG path of the running total
	NowX                                     float64
	Legend                                   []legendView
	Peak                                     string
	Every                                    string // "hour", "5m"
	Jobs                                     []spentView
}

type rectView struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

type tickView struct {
	X, Y   float64
	X1, X2 float64 // a grid line's ends
	Label  string
}

type legendView struct {
	Name, Class string
	Units       int64
	Unit        string
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"num":    num,
	"amount": view.Amount,
	"f":      func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
}

// num formats n with thousands separators: 10,000.
func num(n int64) string { return view.Group(n) }

// credNames lists a named owner's credentials ("yt-key-1, yt-key-2"); empty
// for a credential that is its own owner.
func credNames(st Status) string {
	if st.Owner == "" || st.Owner == st.Fingerprint {
		return ""
	}
	var out []string
	for _, c := range st.Credentials {
		out = append(out, view.CredentialName(quota.CredentialInfo{ID: c.Fingerprint, Label: c.Label}))
	}
	return strings.Join(out, ", ")
}

func anchor(api, fp, budget string) string {
	return "b-" + api + "-" + view.ShortFingerprint(fp) + "-" + budget
}

// ownerName is how the page names an owner: the name every tool gives it
// (view.Owner.Name), "-" for a budget nothing was charged to.
func ownerName(st Status) string { return cmp.Or(st.OwnerName, "-") }

// state classifies a budget for colour: spent (nothing left), high (at or
// past 95%), warn (at or past 80%), ok.
func state(percent int64, spent bool) string {
	switch {
	case spent:
		return "spent"
	case percent >= 95:
		return "high"
	case percent >= 80:
		return "warn"
	}
	return "ok"
}

func (h *Handler) view(s *Snapshot) *mainView {
	now := h.now()
	v := &mainView{
		Updated:  now.In(h.loc).Format("15:04:05 MST"),
		Zone:     h.loc.String(),
		JobsKept: s.JobsKept,
	}
	levels := make([]string, len(h.levels))
	for i, l := range h.levels {
		levels[i] = fmt.Sprintf("%d%%", l)
	}
	v.Levels = strings.Join(levels, ", ")
	for _, st := range s.Status {
		r := rowView{
			API: st.API, Owner: ownerName(st), OwnerTitle: st.Fingerprint, Creds: credNames(st), Budget: st.Budget,
			Window: windowText(st.Window), Unit: st.Unit, Used: st.Used, Limit: st.Limit, Remaining: st.Remaining,
			Percent: st.Percent, Fill: st.Percent, ResetIn: "-", ResetAt: "", SpentUntil: "",
		}
		r.LimitFrom, r.LimitTitle = limitFrom(st)
		r.Drift = st.Drift
		spent := st.Spent()
		r.State = state(st.Percent, spent)
		r.PercentText = fmt.Sprintf("%d%%", st.Percent)
		if spent {
			r.Fill = 100
			r.PercentText = "spent"
		}
		if st.Fingerprint != "" {
			r.Anchor = anchor(st.API, st.Fingerprint, st.Budget)
		}
		if st.Reset != nil {
			r.ResetIn = relative(st.Reset.Sub(now))
			r.ResetAt = st.Reset.In(h.loc).Format("2006-01-02 15:04 MST")
		}
		if st.ExhaustedUntil != nil {
			r.SpentUntil = st.ExhaustedUntil.In(h.loc).Format("2006-01-02 15:04 MST")
			if st.StoreLoss {
				r.SpentUntil += " (store loss: the store lost recorded usage)"
			}
		}
		switch r.State {
		case "spent":
			v.Spent++
		case "high", "warn":
			v.Warn++
		}
		v.Rows = append(v.Rows, r)
	}
	byKey := map[string]Status{}
	owners := map[string]string{} // api/account: the owner's name
	units := map[string]string{}  // api/budget: its unit
	for _, st := range s.Status {
		byKey[st.API+"/"+st.Fingerprint+"/"+st.Budget] = st
		owners[st.API+"/"+st.Owner] = ownerName(st)
		units[st.API+"/"+st.Budget] = st.Unit
	}
	for _, hist := range s.History {
		v.Charts = append(v.Charts, h.chart(hist, byKey[hist.API+"/"+hist.Fingerprint+"/"+hist.Budget], now))
	}
	v.Crossings = h.crossViews(s.Thresholds.Crossings, owners, units, now)
	for _, j := range s.Jobs {
		v.Jobs = append(v.Jobs, h.jobView(j, now))
	}
	return v
}

// crossViews lays out crossings one line per budget, its levels in order;
// the budget that crossed its highest level last comes first. owners names
// the owner of each API/account.
func (h *Handler) crossViews(crossings []Crossing, owners, units map[string]string, now time.Time) []crossView {
	type group struct {
		view   crossView
		latest time.Time
	}
	var groups []*group
	byBudget := map[string]*group{}
	for _, c := range crossings {
		k := c.API + "/" + c.Fingerprint + "/" + c.Budget
		g := byBudget[k]
		if g == nil {
			g = &group{view: crossView{API: c.API, Owner: owners[c.API+"/"+c.Owner], Budget: c.Budget}}
			byBudget[k] = g
			groups = append(groups, g)
		}
		st := state(c.Percent, c.Percent >= 100)
		g.view.Levels = append(g.view.Levels, levelView{
			Percent: c.Percent, At: c.At.In(h.loc).Format("15:04"), Used: c.Used, Limit: c.Limit, State: st,
			Title: fmt.Sprintf("%d%% reached at %s (%s): %s of %s", c.Percent, c.At.In(h.loc).Format("Jan 2 15:04:05 MST"), relative(c.At.Sub(now)), view.Amount(c.Used, units[c.API+"/"+c.Budget]), view.Amount(c.Limit, units[c.API+"/"+c.Budget])),
		})
		g.view.State, g.view.Latest, g.latest = st, relative(c.At.Sub(now)), c.At
	}
	slices.SortStableFunc(groups, func(a, b *group) int { return b.latest.Compare(a.latest) })
	var out []crossView
	for _, g := range groups {
		out = append(out, g.view)
	}
	return out
}

func (h *Handler) jobView(j Job, now time.Time) jobView {
	jv := jobView{Job: j.Job, Start: "-", Ago: "never run", Took: "-", Outcome: "none", Detail: "", Checkpoint: "-"}
	if j.Checkpoint != nil {
		jv.Checkpoint = "saved " + relative(j.Checkpoint.Saved.Sub(now))
	}
	for i := len(j.Runs) - 1; i >= 0; i-- {
		r := j.Runs[i]
		jv.Recent = append(jv.Recent, runView{
			Outcome: string(r.Outcome),
			Title:   fmt.Sprintf("%s: %s, took %s, %s", r.Start.In(h.loc).Format("Jan 2 15:04 MST"), r.Outcome, RoundDuration(r.Duration()), spentText(r.Spent, j.Unit)),
		})
	}
	if j.Last == nil {
		return jv
	}
	r := *j.Last
	jv.Start = r.Start.In(h.loc).Format("Jan 2 15:04:05 MST")
	jv.Ago = relative(r.Start.Sub(now))
	jv.Took = RoundDuration(r.Duration())
	jv.Outcome = string(r.Outcome)
	jv.Charges = r.Charges
	for _, k := range slices.Sorted(maps.Keys(r.Spent)) {
		jv.Spent = append(jv.Spent, spentView{Budget: k, Units: r.Spent[k], Unit: j.Unit(k)})
	}
	jv.Detail = detail(r, j.Unit, now)
	return jv
}

// detail says why run r ended the way it did, amounts in their budget's
// unit (unit of "API/BUDGET").
func detail(r jobs.Record, unit func(budget string) string, now time.Time) string {
	switch {
	case r.Exhausted != nil:
		e := r.Exhausted
		return fmt.Sprintf("%s spent (%s of %s used); capacity back %s", e.Budget, view.Amount(e.Used, unit(e.Budget)), view.Amount(e.Limit, unit(e.Budget)), relative(e.RetryAt.Sub(now)))
	case r.Error != "":
		return strings.Join(strings.Fields(r.Error), " ")
	}
	return ""
}

// spentText is a run's spending, each budget in its unit (unit of
// "API/BUDGET"): "openai/spend $12.34, openai/tokens 1,234 tokens".
func spentText(spent map[string]int64, unit func(budget string) string) string {
	if len(spent) == 0 {
		return "nothing spent"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(spent)) {
		parts = append(parts, k+" "+view.Amount(spent[k], unit(k)))
	}
	return strings.Join(parts, ", ")
}

// chart lays out one budget's window per bucket, scaled to the limit: a bar
// per bucket stacked by method, the running total as a line, the limit at
// the top.
func (h *Handler) chart(hist History, st Status, now time.Time) chartView {
	w, _ := quota.ParseWindow(hist.Window)
	loc, err := time.LoadLocation(hist.Zone)
	if err != nil {
		loc = h.loc
	}
	c := chartView{
		Anchor: anchor(hist.API, hist.Fingerprint, hist.Budget), API: hist.API, Owner: ownerName(st),
		Budget: hist.Budget, Zone: hist.Zone, Window: windowText(hist.Window), Unit: st.Unit, Used: hist.Used, Limit: hist.Limit,
		Percent: st.Percent, State: state(st.Percent, st.Spent()),
		W: chartW, H: chartH, PlotLeft: chartLeft, PlotRight: chartW - chartRight, PlotTop: chartTop, PlotBottom: chartTop + plotH,
	}
	if len(hist.Buckets) == 0 || hist.Limit <= 0 {
		return c
	}
	every := time.Duration(hist.EverySeconds * float64(time.Second))
	first := hist.Buckets[0].Start
	slots := len(hist.Buckets)
	if w.IsCalendar() {
		// The whole day (month), with the hours (days) still to come left
		// empty.
		slots = max(slots, int(w.NextReset(now).Sub(first)/every))
	}
	sw := slot(slots)
	barW := sw * 0.74
	y := func(units int64) float64 {
		f := min(float64(units)/float64(hist.Limit), 1)
		return chartTop + plotH*(1-f)
	}

	methods, class, legend := methodClasses(hist)
	for i := range legend {
		legend[i].Unit = st.Unit
	}
	c.Legend = legend
	var cum int64
	path := []string{fmt.Sprintf("M%.1f %.1f", float64(chartLeft), y(0))}
	var peak Bucket
	for i, b := range hist.Buckets {
		x := chartLeft + sw*float64(i) + (sw-barW)/2
		start := b.Start.In(loc)
		title := fmt.Sprintf("%s–%s %s: %s in %d call%s", start.Format("15:04"), b.End.In(loc).Format("15:04"), start.Format("MST"), view.Quantity(b.Units, st.Unit), b.Calls, plural(b.Calls))
		if b.Units > peak.Units {
			peak = b
		}
		base := int64(0)
		segs := bucketSegs(b, methods, class)
		for _, sg := range segs {
			top, bottom := y(base+sg.units), y(base)
			if bottom-top < 1 {
				top = bottom - 1 // something was used: show it
			}
			t := title
			if sg.name != "" {
				t += fmt.Sprintf("; %s: %s", sg.name, view.Amount(sg.units, st.Unit))
			}
			c.Bars = append(c.Bars, rectView{X: x, Y: top, W: barW, H: bottom - top, Class: sg.class, Title: t})
			base += sg.units
		}
		cum += b.Units
		path = append(path, fmt.Sprintf("L%.1f %.1f", chartLeft+sw*float64(i+1), y(cum)))
	}
	c.Cumulative = strings.Join(path, " ")
	// The "now" line within its hour.
	nowOff := now.Sub(first)
	c.NowX = chartLeft + sw*(float64(nowOff)/float64(every))
	c.NowX = min(max(c.NowX, chartLeft), chartW-chartRight)

	c.XTicks, c.YTicks = ticks(hist, st.Unit, first, every, slots, loc, y)
	c.Every = "hour"
	if every != time.Hour {
		c.Every = compact(every)
	}
	for _, j := range slices.Sorted(maps.Keys(hist.Jobs)) {
		c.Jobs = append(c.Jobs, spentView{Budget: j, Units: hist.Jobs[j], Unit: st.Unit})
	}
	c.Peak = peakText(peak, c.Every, every, hist.Limit, st.Unit, loc)
	return c
}

// methodClasses orders a chart's methods by units, the biggest first, and
// gives each its bar class (past maxMethods, "other"), with the legend.
func methodClasses(hist History) ([]string, map[string]string, []legendView) {
	totals := map[string]int64{}
	for _, b := range hist.Buckets {
		for m, u := range b.Methods {
			totals[m] += u
		}
	}
	methods := slices.SortedFunc(maps.Keys(totals), func(a, b string) int { return cmp.Or(cmp.Compare(totals[b], totals[a]), cmp.Compare(a, b)) })
	class := map[string]string{}
	var legend []legendView
	for i, m := range methods {
		if i < maxMethods {
			class[m] = fmt.Sprintf("m%d", i)
			legend = append(legend, legendView{Name: m, Class: class[m], Units: totals[m]})
		} else {
			class[m] = "mo"
		}
	}
	if len(methods) > maxMethods {
		var other int64
		for _, m := range methods[maxMethods:] {
			other += totals[m]
		}
		legend = append(legend, legendView{Name: "other methods", Class: "mo", Units: other})
	}
	if len(methods) == 0 && hist.Used > 0 {
		legend = append(legend, legendView{Name: "all methods", Class: "mall", Units: hist.Used})
	}
	return methods, class, legend
}

// bucketSegs returns a bucket's bar segments: one per method in the
// legend's order, "other methods", and the units recorded without a
// method.
func bucketSegs(b Bucket, methods []string, class map[string]string) []seg {
	var segs []seg
	if len(b.Methods) == 0 {
		if b.Units > 0 {
			segs = append(segs, seg{b.Units, "mall", ""})
		}
		return segs
	}
	var other int64
	for _, m := range methods {
		u := b.Methods[m]
		if u == 0 {
			continue
		}
		if class[m] == "mo" {
			other += u
			continue
		}
		segs = append(segs, seg{u, class[m], m})
	}
	if other > 0 {
		segs = append(segs, seg{other, "mo", "other methods"})
	}
	// Units recorded without a method.
	var named int64
	for _, u := range b.Methods {
		named += u
	}
	if rest := b.Units - named; rest > 0 {
		segs = append(segs, seg{rest, "mall", "not by a method (adjusted)"})
	}
	return segs
}

// ticks returns a chart's axis labels: times along the bottom (every 3
// hours of an hourly chart, else about 8 labels), and 0, 50% and 100% of
// the limit up the side.
func ticks(hist History, unit string, first time.Time, every time.Duration, slots int, loc *time.Location, y func(int64) float64) (xs, ys []tickView) {
	step := (slots + 7) / 8
	for i := 0; i < slots; i++ {
		t := first.Add(time.Duration(i) * every).In(loc)
		label := every == time.Hour && slots <= 30 && t.Hour()%3 == 0 && t.Minute() == 0 ||
			(every != time.Hour || slots > 30) && i%step == 0
		if label {
			xs = append(xs, tickView{X: chartLeft + slot(slots)*float64(i), Y: chartTop + plotH + 15, Label: t.Format("15:04")})
		}
	}
	for _, f := range []int64{0, 50, 100} {
		units := hist.Limit * f / 100
		ys = append(ys, tickView{X: chartLeft - 6, Y: y(units), X1: chartLeft, X2: chartW - chartRight, Label: view.Scale(units, unit)})
	}
	return xs, ys
}

// slot is the width of one of a chart's slots.
func slot(slots int) float64 { return float64(plotW) / float64(slots) }

// peakText names a chart's busiest bucket.
func peakText(peak Bucket, name string, every time.Duration, limit int64, unit string, loc *time.Location) string {
	switch {
	case peak.Units <= 0:
		return ""
	case every != time.Hour:
		return fmt.Sprintf("busiest %s from %s (%s, %d%% of the limit)", name, peak.Start.In(loc).Format("15:04 MST"), view.Quantity(peak.Units, unit), peak.Units*100/limit)
	}
	return fmt.Sprintf("busiest hour %s (%s, %d%% of the limit)", peak.Start.In(loc).Format("15:04 MST"), view.Quantity(peak.Units, unit), peak.Units*100/limit)
}

// seg is one method's part of an hour's bar.
type seg struct {
	units int64
	class string
	name  string
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// windowText says what a window is in words.
func windowText(s string) string {
	w, err := quota.ParseWindow(s)
	if err != nil {
		return s
	}
	switch {
	case w.IsDaily():
		return "daily, resets at midnight " + w.Location().String()
	case w.IsMonthly():
		return "monthly, resets on the 1st at midnight " + w.Location().String()
	}
	return "sliding " + compact(w.Duration())
}

// RoundDuration formats how long something took at a precision a person
// reads: "412ms" under a second, "12.3s" under a minute, then to the
// second with at most two units ("5m30s", "2h5m", "1d2h"). quotactl's
// terminal output uses the same rules.
func RoundDuration(d time.Duration) string { return humantime.Took(d) }

func relative(d time.Duration) string { return humantime.Relative(d) }

func compact(d time.Duration) string { return humantime.Compact(d) }

// limitFrom says where a row's limit comes from, in a word or two for the
// cell ("operator (owner)": the owner's own limit, set by an operator) and
// in full for its title, with a limit the upstream reported that is not
// applied.
func limitFrom(st Status) (short, title string) {
	src := string(st.LimitSource)
	if src == "" {
		src = string(quota.SourceProgram)
	}
	short, title = src, "the budget's limit, defined by the "+src
	if st.OwnLimit {
		short, title = src+" (owner)", "this owner's own limit, from the "+src
	}
	if st.LearnedLimit > 0 && st.LimitSource != quota.SourceUpstream {
		short += "; upstream says " + view.Amount(st.LearnedLimit, st.Unit)
		title += "; the upstream reported " + view.Amount(st.LearnedLimit, st.Unit) + ", not applied"
	}
	return short, title
}
