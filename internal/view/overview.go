package view

import (
	"context"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// Crossing is a usage threshold one budget crossed in its current window.
type Crossing struct {
	API         string    `json:"api"`
	Owner       string    `json:"owner,omitempty"`
	Credential  string    `json:"credential"`
	Fingerprint string    `json:"fingerprint"`
	Budget      string    `json:"budget"`
	Percent     int64     `json:"percent"` // a level: 50, 80, 95 or 100 by default
	At          time.Time `json:"at"`      // when usage first reached it in the window
	Used        int64     `json:"used"`    // units counted right after that charge
	Limit       int64     `json:"limit"`
}

// Thresholds lists the crossings of every budget. Derived is true: they are
// computed from the entries counted in each window (the first charge that
// took usage to each level), not from recorded events.
type Thresholds struct {
	Derived   bool       `json:"derived"`
	Levels    []int64    `json:"levels"`
	Crossings []Crossing `json:"crossings"`
}

// Overview is every budget of every owner of the store at one instant: its
// status, its window per Every bucket, and the levels it crossed.
type Overview struct {
	Now        time.Time  `json:"now"`
	Status     []Status   `json:"status"`
	History    []History  `json:"history"`
	Thresholds Thresholds `json:"thresholds"`
	// APIs is the catalog the overview was read from.
	APIs []API `json:"-"`
}

// Overview reads the status of every budget of every owner (as Status), the
// history of each budget an owner has (as History, shown for the owner's
// first credential, in the same order) and the crossings of levels (in
// percent, ascending) in each window.
func (r *Reader) Overview(ctx context.Context, levels []int64) (*Overview, error) {
	now := r.Now()
	apis, err := r.APIs(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := r.Status(ctx, apis...)
	if err != nil {
		return nil, err
	}
	o := &Overview{Now: now.UTC(), Status: rows, History: []History{}, Thresholds: Thresholds{Derived: true, Levels: levels, Crossings: []Crossing{}}, APIs: apis}
	byName := map[string]API{}
	for _, a := range apis {
		byName[a.Name] = a
	}
	for _, st := range rows {
		if st.Owner == "" {
			continue // a whole budget: nothing charged, nothing to chart
		}
		b, _ := byName[st.API].Budget(st.Budget)
		h, entries, err := r.history(ctx, st.API, st.Owner, b, 0, now)
		if err != nil {
			return nil, err
		}
		h.Credential, h.Fingerprint = st.Credential, st.Fingerprint
		o.History = append(o.History, h)
		o.Thresholds.Crossings = append(o.Thresholds.Crossings, crossings(st, entries, levels)...)
	}
	return o, nil
}

// crossings walks the window's entries, oldest first, and returns the first
// charge that took usage to each level. A budget marked spent with no
// charge taking it to 100% gets no 100% crossing here: its mark is on its
// status.
func crossings(st Status, entries []quota.Entry, levels []int64) []Crossing {
	var out []Crossing
	var used int64
	next := 0
	for _, e := range entries {
		used += e.Cost
		for next < len(levels) && used*100 >= levels[next]*st.Limit {
			out = append(out, Crossing{
				API: st.API, Owner: st.Owner, Credential: st.Credential, Fingerprint: st.Fingerprint, Budget: st.Budget,
				Percent: levels[next], At: e.At.UTC(), Used: used, Limit: st.Limit,
			})
			next++
		}
	}
	return out
}
