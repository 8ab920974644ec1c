package storetest

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// limit returns a budget's limit: mostly valid, now and then not.
func (p *program) limit() int64 {
	switch p.in.n(16) {
	case 0:
		return 1
	case 9:
		return 5
	case 10:
		return 100
	case 11:
		return 1 << 20
	case 1:
		return 2
	case 2:
		return 10
	case 3:
		return 1000
	case 4:
		return quota.MaxLimit
	case 5:
		return quota.MaxLimit - 1
	case 6:
		return 1 + int64(p.in.u64()%quota.MaxLimit) // any valid limit
	case 7:
		return 1 + int64(p.in.u8())
	case 8, 12, 13, 14:
		return 1 + int64(p.in.u64()%1e6)
	}
	// invalid ones, one time in sixteen
	return []int64{0, -1, quota.MaxLimit + 1, math.MaxInt64, math.MinInt64}[p.in.n(5)]
}

// window returns a budget's window: mostly valid, now and then not.
func (p *program) window() quota.Window {
	switch p.in.n(16) {
	case 0:
		return quota.Sliding(time.Microsecond)
	case 1:
		return quota.Sliding(time.Second)
	case 2:
		return quota.Sliding(time.Hour)
	case 3:
		return quota.Sliding(24 * time.Hour)
	case 4:
		// any whole number of µs
		return quota.Sliding(time.Duration(1+p.in.u64()%uint64(math.MaxInt64/1000)) * time.Microsecond)
	case 5:
		// up to a year and a bit, whole µs
		return quota.Sliding(time.Duration(1+p.in.u64()%(400*24*3600*1e6)) * time.Microsecond)
	case 6:
		// any duration: negative, zero and fractions of a µs are invalid
		return quota.Sliding(time.Duration(p.in.i64()))
	case 7, 8:
		return quota.Daily(time.UTC)
	case 9, 11:
		return quota.Daily(laZone)
	case 12:
		return quota.Monthly(laZone)
	case 10:
		return quota.Daily(howeZone)
	case 13:
		return quota.Sliding(time.Minute)
	case 14:
		return quota.Sliding(10 * time.Minute)
	}
	return quota.Daily(nil) // invalid
}

// charge returns a charge: the subset of the budgets a 16-bit mask
// names (bit i budget i), each with a cost, mostly one it can pay; now
// and then with a name of no budget, an invalid name, or a name given
// twice (the map keeps its last cost); or, one time in eight, up to 13
// names drawn at random, budgets or not, with any cost.
func (p *program) charge() quota.Charge {
	ch := quota.Charge{Units: map[string]int64{}}
	switch p.in.n(4) {
	case 1:
		ch.Method = "search.list"
	case 2:
		ch.Method = strings.Repeat("m", 300)
	case 3:
		ch.Method = "bad\x00\xff method/π"
	}
	mode := p.in.u8()
	if mode%8 == 7 {
		for range p.in.n(14) {
			name := p.name()
			ch.Units[name] = p.cost(name)
		}
		return ch
	}
	mask := uint16(p.in.u8()) | uint16(p.in.u8())<<8
	for i, b := range p.budgets {
		if mask&(1<<i) != 0 {
			ch.Units[b.Name] = p.cost(b.Name)
		}
	}
	switch mode >> 5 {
	case 5:
		ch.Units["nope"] = p.cost("nope")
	case 6:
		ch.Units["bad name/π"] = 1
	case 7:
		if len(ch.Units) > 0 {
			name := p.budgets[p.in.n(len(p.budgets))].Name
			ch.Units[name] = p.cost(name) // a second time: the last cost counts
		}
	}
	return ch
}

// name returns a budget's name, or one of no budget.
func (p *program) name() string {
	i := p.in.n(len(p.budgets) + 3)
	switch {
	case i < len(p.budgets):
		return p.budgets[i].Name
	case i == len(p.budgets):
		return "nope"
	case i == len(p.budgets)+1:
		return ""
	}
	return "bad name/π"
}

// limitOf returns the limit of budget name, or 0 when it is none.
func (p *program) limitOf(name string) int64 {
	for _, b := range p.budgets {
		if b.Name == name {
			return b.Limit
		}
	}
	return 0
}

func (p *program) cost(name string) int64 {
	lim := p.limitOf(name)
	switch p.in.n(20) {
	case 0, 1, 2, 3:
		return 1
	case 4:
		return 2
	case 5, 6:
		return lim
	case 7:
		return max(lim-1, 1)
	case 8:
		return max(lim/2, 1)
	case 9:
		return 1 + int64(p.in.u8())%max(lim, 1)
	case 10:
		return 1 + int64(p.in.u64()%uint64(max(lim, 1)))
	// the rest can be paid by no budget, or only by a large one
	case 11:
		return lim + 1
	case 12:
		return 0
	case 13:
		return -1
	case 14:
		return math.MaxInt64
	case 15:
		return math.MinInt64
	case 16:
		return quota.MaxLimit
	case 17:
		return quota.MaxLimit + 1
	case 18:
		return int64(p.in.u8())
	}
	return p.in.i64()
}

// actual returns units for Limiter.Settle.
func (p *program) actual() map[string]int64 {
	k := p.in.n(6)
	m := map[string]int64{}
	for range k {
		name := p.name()
		switch p.in.n(8) {
		case 0, 1:
			m[name] = 0
		case 2:
			m[name] = 1
		case 3:
			m[name] = -1
		case 4:
			m[name] = math.MaxInt64
		case 5:
			m[name] = math.MinInt64
		case 6:
			m[name] = int64(p.in.u8())
		default:
			m[name] = p.in.i64()
		}
	}
	return m
}

// usage returns cred's Status, or nil when it has none (an empty
// credential, a label not registered yet).
func (p *program) usage(cred int) []quota.Usage {
	p.t.Helper()
	us, err := p.l.Status(p.ctx, programCreds[cred])
	if err != nil {
		switch {
		case cred == 3 && errors.Is(err, quota.ErrInvalid):
		case cred == 4 && errors.Is(err, quota.ErrUnknownCredential):
		default:
			p.fatalf("Status(cred %d): %v", cred, err)
		}
		return nil
	}
	p.checkUsage(fmt.Sprintf("Status(cred %d)", cred), us)
	return us
}

// checkUsage checks a Status: one usage per budget, in order, in range.
func (p *program) checkUsage(what string, us []quota.Usage) {
	p.t.Helper()
	if len(us) != len(p.budgets) {
		p.fatalf("%s: %d usages for %d budgets", what, len(us), len(p.budgets))
	}
	for i, u := range us {
		b := p.budgets[i]
		if u.Budget != b.Name || u.Limit != b.Limit {
			p.fatalf("%s: usage %d is %+v, want budget %s limit %d", what, i, u, b.Name, b.Limit)
		}
		if u.Used < 0 || !p.stepped && u.Used > u.Limit {
			p.fatalf("%s: %s used %d of %d", what, u.Budget, u.Used, u.Limit)
		}
		if u.Remaining < 0 || u.Remaining > u.Limit || u.Remaining > max(u.Limit-u.Used, 0) {
			p.fatalf("%s: %s used %d of %d, remaining %d", what, u.Budget, u.Used, u.Limit, u.Remaining)
		}
	}
}

func (p *program) status(cred int) { p.logf("status cred %d", cred); p.usage(cred) }

// sameUsage checks that nothing changed but the budgets in delta, which
// moved by as much.
func (p *program) sameUsage(what string, before, after []quota.Usage, delta map[string]int64) {
	p.t.Helper()
	if before == nil || after == nil {
		return
	}
	for i := range before {
		name := before[i].Budget
		if want := before[i].Used + delta[name]; after[i].Used != want {
			p.fatalf("%s: %s used %d, want %d (%d before, %+d)", what, name, after[i].Used, want, before[i].Used, delta[name])
		}
	}
}

// judge classifies a charge: whether some name is no budget or some cost
// is <= 0 (ErrInvalid), whether some cost is over its budget's limit
// (ErrCostExceedsLimit).
func (p *program) judge(ch quota.Charge) (invalid, tooBig bool) {
	invalid = len(ch.Units) == 0
	for name, c := range ch.Units {
		lim := p.limitOf(name)
		switch {
		case lim == 0 || c <= 0:
			invalid = true
		case c > lim:
			tooBig = true
		}
	}
	return invalid, tooBig
}
