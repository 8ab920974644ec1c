package sqlitestore

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// logRow is one log, the (api, credential, budget) triple, as the sums
// table holds it, while a transaction works on it.
type logRow struct {
	id     int64
	budget string
	// window is the window the log keeps its entries for (backend.Retain):
	// the budget's window, or a longer one after the window was shortened,
	// so that a longer window it had still finds its entries.
	window string
	kept   backend.Window // window, parsed; zero while it equals the budget's
	used   int64          // running sum of the costs of the log's entries
	gap    int64          // of used, units the budget's window no longer counts
	exh    int64          // exhausted until, µs; 0 if not marked
	idle   int64          // every entry expired and the mark ended by then, µs
	dirty  bool           // the sums row needs writing back
	seen   bool           // debited by the decision at hand
	deb    int            // in Take, the index of its debit; -1 for none
}

// wtx is a decision's transaction on the decision connection: its
// prepared statements, and what one decision leaves for the next to reuse.
// The gate serialises decisions, so a Store has one.
type wtx struct {
	st   *stmts
	logs []logRow
	lgs  []*logRow
	win  map[backend.Window]string // text forms of windows met, a few dozen at most
}

// winText returns win.String(), without building it again for a window
// seen before.
func (w *wtx) winText(win backend.Window) string {
	if t, ok := w.win[win]; ok {
		return t
	}
	if len(w.win) >= 64 || w.win == nil {
		w.win = make(map[backend.Window]string)
	}
	t := win.String()
	w.win[win] = t
	return t
}

// scanLog reads the current row of credLogs or logByName into lg, but for
// the budget's name and window (see storedWindow).
func scanLog(s *stmt, lg *logRow) {
	lg.id, lg.used, lg.exh, lg.idle = s.col(0), s.col(3), s.col(4), s.col(5)
}

// storedWindow returns the window text of the current row of credLogs or
// logByName. win is the window text the budget is used with now: the
// stored window, when it is that one, costs no copy.
func storedWindow(s *stmt, win string) string {
	if v := s.view(2); v != win {
		return strings.Clone(v)
	}
	return win
}

// credLogs returns every log of one credential, in the decision's scratch,
// with room to append one per debit without moving. A log of a debited
// budget has its budget's name and the debit's index in deb; the others
// have neither (nor their window's text), only what the decision needs to
// drop them.
func (w *wtx) credLogs(api, cred string, debits []backend.Debit) ([]logRow, error) {
	logs := w.logs[:0]
	s := w.st.credLogs.text(1, api).text(2, cred)
	for s.next() {
		lg := logRow{deb: -1}
		name := s.view(1)
		for i := range debits {
			if debits[i].Name == name {
				lg.budget, lg.deb = debits[i].Name, i
				break
			}
		}
		scanLog(s, &lg)
		if lg.deb >= 0 {
			lg.window = storedWindow(s, w.winText(debits[lg.deb].Window))
		}
		logs = append(logs, lg)
	}
	if err := s.done(); err != nil {
		return nil, err
	}
	logs = slices.Grow(logs, len(debits))
	w.logs = logs
	return logs, nil
}

// log returns the log of budget b, creating it if create is set; nil if it
// does not exist and create is not set.
func (w *wtx) log(api, cred string, b backend.Budget, now time.Time, create bool) (*logRow, error) {
	lg := &logRow{budget: b.Name, deb: -1}
	found := false
	s := w.st.logByName.text(1, api).text(2, cred).text(3, b.Name)
	if s.next() {
		found = true
		scanLog(s, lg)
		lg.window = storedWindow(s, w.winText(b.Window))
	}
	switch err := s.done(); {
	case err != nil:
		return nil, err
	case !found && create:
		return lg, w.create(lg, api, cred, b)
	case !found:
		return nil, nil
	}
	return lg, w.setWindow(lg, b.Window, now)
}

// counted returns the units the budget's window counts.
func (lg *logRow) counted() int64 { return lg.used - lg.gap }

// create makes lg the new log of budget b.
func (w *wtx) create(lg *logRow, api, cred string, b backend.Budget) error {
	*lg = logRow{budget: b.Name, window: w.winText(b.Window), seen: true, deb: lg.deb}
	found := false
	s := w.st.newLog.text(1, api).text(2, cred).text(3, b.Name).text(4, lg.window)
	for s.next() {
		lg.id, found = s.col(0), true
	}
	if err := s.done(); err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("log of budget %q: inserted without an id", b.Name)
	}
	return nil
}

// setWindow records the window a log is used with at now, and how long it
// keeps its entries (backend.Retain: a shortened window keeps what the longer
// one counted). When the window changed (the budget was redefined), it
// first deletes the entries the old kept window no longer keeps (gone for
// every window, even a longer one set now), and recomputes idle_after so
// the sweep never drops an entry a kept window counts.
func (w *wtx) setWindow(lg *logRow, win backend.Window, now time.Time) error {
	ws := w.winText(win)
	lg.kept = backend.Window{}
	if lg.window == ws {
		return nil // the hot path: the definition did not change
	}
	old, err := backend.ParseWindow(lg.window)
	if err != nil {
		return fmt.Errorf("log of budget %q: stored window %q: %w", lg.budget, lg.window, err)
	}
	if old.IsCalendar() {
		// what the old calendar window set aside may count under the new one
		if err := w.unarchive(lg, old, now); err != nil {
			return err
		}
	}
	if err := w.prune(lg, backend.KeptSince(old, now).UnixMicro(), now.UnixMicro(), 0); err != nil {
		return err
	}
	kept := win
	if lg.used != 0 { // an empty log starts afresh
		kept = backend.Retain(old, win)
	}
	if ks := kept.String(); ks != ws {
		lg.kept = kept
	}
	if ks := kept.String(); ks == lg.window {
		return nil
	}
	lg.window, lg.dirty = kept.String(), true
	var newest int64
	valid := false
	s := w.st.newest.int(1, lg.id)
	if s.next() && !s.null(0) {
		newest, valid = s.col(0), true
	}
	if err := s.done(); err != nil {
		return err
	}
	lg.idle = lg.exh
	if valid {
		at := time.UnixMicro(newest)
		lg.idle = max(lg.idle, win.Expiry(at).UnixMicro(), backend.KeptUntil(kept, at).UnixMicro())
	}
	return nil
}

// trim prunes the log for window win at now: it deletes the entries that
// neither win nor the kept window counts, and sets the units kept but no
// longer counted.
func (w *wtx) trim(lg *logRow, win backend.Window, now time.Time) error {
	start := win.Start(now).UnixMicro()
	if lg.kept.IsZero() {
		lg.gap = 0
		return w.prune(lg, start, now.UnixMicro(), backend.AsideKeep(win))
	}
	if err := w.prune(lg, backend.PruneBefore(lg.kept, win, now).UnixMicro(), now.UnixMicro(), 0); err != nil {
		return err
	}
	s := w.st.gap.int(1, lg.id).int(2, start)
	if s.next() {
		lg.gap = s.col(0)
	}
	return s.done()
}

// expiry returns when an entry recorded at now leaves both the budget's
// window and the kept one (µs).
func (lg *logRow) expiry(win backend.Window, now time.Time) int64 {
	e := backend.KeptUntil(win, now).UnixMicro()
	if !lg.kept.IsZero() {
		e = max(e, backend.KeptUntil(lg.kept, now).UnixMicro())
	}
	return e
}

// prune deletes the log's entries recorded before start (µs), subtracting
// their costs from the running sum: O(expired entries). It also drops an
// exhaustion mark that has ended by now. With aside > 0 (a log kept for
// a calendar window: its backend.AsideKeep, DailyKeep or MonthlyKeep), it
// sets the entries aside instead (log = -id), out of the sum, and deletes
// those set aside more than aside before now: a budget redefined with
// another zone or a sliding window counts the others again (unarchive).
// The set-aside entries are trimmed when more are set aside, at a day's
// (month's) first decision; whatever their number, none older than aside
// counts again.
func (w *wtx) prune(lg *logRow, start, now int64, aside time.Duration) error {
	var freed int64
	moved := false
	q := w.st.prune
	if aside > 0 {
		q = w.st.setAside
	}
	s := q.int(1, lg.id).int(2, start)
	for s.next() {
		freed += s.col(0)
		moved = true
	}
	if err := s.done(); err != nil {
		return err
	}
	if aside > 0 && moved {
		if err := w.st.trimAside.int(1, lg.id).int(2, now-aside.Microseconds()+1).exec(); err != nil {
			return err
		}
	}
	if freed != 0 {
		lg.used -= freed
		lg.dirty = true
	}
	if lg.exh != 0 && lg.exh <= now {
		lg.exh = 0
		lg.dirty = true
	}
	return nil
}

// unarchive puts the log's set-aside entries recorded in the last
// backend.AsideKeep(old) back in it, and their costs in its running sum,
// and deletes the older ones: the log's window changed from old, a
// calendar window, and the new one may count them.
func (w *wtx) unarchive(lg *logRow, old backend.Window, now time.Time) error {
	from := backend.KeptSince(old, now).UnixMicro()
	var back int64
	s := w.st.unarchive.int(1, lg.id).int(2, from)
	for s.next() {
		back += s.col(0)
	}
	if err := s.done(); err != nil {
		return err
	}
	if back != 0 {
		lg.used += back
		lg.dirty = true
	}
	return w.st.trimAside.int(1, lg.id).int(2, from).exec()
}

// retryAt walks the log oldest first until deficit units are covered and
// returns when the entry that covers them expires (µs): exactly when a
// charge short of deficit units fits. Entries at one instant expire
// together, so their order among themselves does not matter.
func (w *wtx) retryAt(lg *logRow, win backend.Window, deficit int64, now time.Time) (int64, error) {
	var freed, at int64
	found := false
	s := w.st.walk.int(1, lg.id).int(2, win.Start(now).UnixMicro())
	for !found && s.next() {
		freed += s.col(1)
		if freed >= deficit {
			at, found = s.col(0), true
		}
	}
	if err := s.done(); err != nil {
		return 0, err
	}
	if found {
		return win.Expiry(time.UnixMicro(at)).UnixMicro(), nil
	}
	// Unreachable while cost <= limit: the log holds at least used units.
	return 0, fmt.Errorf("log of budget %q holds fewer units than its running sum %d", lg.budget, lg.counted())
}

// usage describes the log at now.
func (w *wtx) usage(lg *logRow, b backend.Budget, now time.Time) (backend.Usage, error) {
	u := backend.Usage{Budget: b.Name, Window: b.Window, Limit: b.Limit, Used: lg.counted()}
	if lg.exh > now.UnixMicro() {
		u.ExhaustedUntil = time.UnixMicro(lg.exh)
	}
	if b.Window.IsCalendar() {
		u.Reset = time.UnixMicro(b.Window.NextReset(now).UnixMicro())
		return u, nil
	}
	s := w.st.oldest.int(1, lg.id).int(2, b.Window.Start(now).UnixMicro())
	if s.next() && !s.null(0) {
		u.Reset = time.UnixMicro(s.col(0) + b.Window.Duration().Microseconds())
	}
	return u, s.done()
}

func (w *wtx) save(lg *logRow) error {
	if !lg.dirty {
		return nil
	}
	lg.dirty = false
	return w.st.updateLog.text(1, lg.window).int(2, lg.used).int(3, lg.exh).int(4, lg.idle).int(5, lg.id).exec()
}

// drop deletes a log and its entries.
func (w *wtx) drop(id int64) error {
	if err := w.st.clearLog.int(1, id).int(2, id).exec(); err != nil {
		return err
	}
	return w.st.dropLog.int(1, id).exec()
}
