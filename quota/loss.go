package quota

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// ErrStoreLost is the cause reported (to an observer, in logs) when a store
// is found to have lost recorded usage. A decision that finds it is not an
// error: it is refused with an *ExhaustedError (SpendOnLoss) or decided on
// what the store holds (TrustStore).
var ErrStoreLost = errors.New("quota: the store lost recorded usage")

// StoreLossPolicy says what a Limiter does when its store finds that it
// lost recorded state: Redis restarted without persistence, was flushed,
// evicted the limiter's keys, or failed over to a replica that missed the
// last writes. Set it with WithStoreLoss.
type StoreLossPolicy int

const (
	// SpendOnLoss, the default, counts every affected budget as spent until
	// its next reset (daily, monthly) or for one window (sliding), marked in the
	// store so that every process sharing it stops; the charge that found
	// the loss is refused with an *ExhaustedError. Adjust (quotactl adjust)
	// restores the true usage and clears the mark.
	SpendOnLoss StoreLossPolicy = iota
	// TrustStore decides on what the store still holds, as if nothing had
	// been lost: units spent before the loss may be spent again. The loss
	// is still logged and counted.
	TrustStore
)

// WithStoreLoss sets what the limiter does when its store finds that it
// lost recorded state. Default: SpendOnLoss. Either way each finding is
// logged once at Error level and counted (Limiter.StoreLosses). Only stores
// that can lose state find it (quota/redisstore).
func WithStoreLoss(p StoreLossPolicy) Option {
	return func(l *Limiter) { l.loss.trust = p == TrustStore }
}

// StoreLosses returns how many decisions found that the store had lost
// recorded state (each finding is one, whatever the budgets it affected).
func (l *Limiter) StoreLosses() uint64 { return l.loss.count.Load() }

// lossState is a Limiter's store-loss policy, counter and hook.
type lossState struct {
	trust bool
	count atomic.Uint64
	// hook, when set, is told of every finding after it is handled (an
	// observer reports it, with f.err() as the cause, once per budget in
	// f.Budgets). It runs on the deciding goroutine.
	hook func(ctx context.Context, f storeLoss)
}

// storeLoss is one finding of lost store state.
type storeLoss struct {
	API        string
	Owner      string // the account, as stored: the owner's name or the fingerprint
	Credential string // the credential's fingerprint
	Label      string
	// Budgets are the affected budgets: every budget of the limiter when
	// OwnerWide, else the debited budgets found lost.
	Budgets   []string
	OwnerWide bool      // the store lost acknowledged writes of the owner
	At        time.Time // the store's now at the finding
	Trusted   bool      // TrustStore: nothing was marked spent
	// Until is when the affected budgets stop counting as spent, per
	// budget (empty when Trusted).
	Until map[string]time.Time
}

// lostState handles what a Take found of lost store state: nothing to do
// in the usual case. For a loss of the owner's acknowledged writes under
// SpendOnLoss, it marks the limiter's budgets that the charge did not name
// spent too (the store marked the debited ones itself, atomically with the
// finding).
func (l *Limiter) lostState(ctx context.Context, req *backend.TakeRequest, res *backend.TakeResult, id ident) {
	if !res.StoreLoss && !anyLost(res.Usage) {
		return
	}
	n := l.loss.count.Add(1)
	label := id.label
	if res.StoreLoss {
		// The budget definitions and the credential's record went with the
		// rest (they live outside the owner's keys): record them again.
		l.recatalog(ctx)
		owner := ""
		if id.account != id.fp {
			owner = id.account
		}
		if _, err := l.store.UpdateCredential(ctx, l.api, backend.CredentialUpdate{Op: backend.OpRegister, ID: id.fp, Label: label, Owner: owner}); err != nil {
			l.log.Error("quota: store lost recorded usage and recording the credential again failed", "api", l.api, "owner", who(id), "error", err)
		}
	}
	f := storeLoss{API: l.api, Owner: req.Owner, Credential: id.fp, Label: label, OwnerWide: res.StoreLoss, At: res.At, Trusted: req.TrustStore}
	if !f.Trusted {
		f.Until = map[string]time.Time{}
	}
	for _, u := range res.Usage {
		if u.StoreLoss || res.StoreLoss {
			f.Budgets = append(f.Budgets, u.Budget)
			if !f.Trusted {
				f.Until[u.Budget] = u.ExhaustedUntil
			}
		}
	}
	if res.StoreLoss {
		for _, b := range l.budgets {
			if containsDebit(req.Debits, b.Name) {
				continue
			}
			f.Budgets = append(f.Budgets, b.Name)
			if f.Trusted {
				continue
			}
			b = l.def(b) // the definition in force (an operator's override)
			until := b.Window.Expiry(res.At)
			err := l.store.Exhaust(ctx, &backend.ExhaustRequest{API: l.api, Owner: req.Owner, Budget: b, Until: until, Now: req.Now, StoreLoss: true})
			if err != nil {
				l.log.Error("quota: store lost recorded usage and marking a budget spent failed",
					"api", l.api, "owner", who(id), "budget", b.Name, "error", err)
				continue
			}
			f.Until[b.Name] = until
		}
	}
	what := "affected budgets count as spent until their next reset or for one window"
	if f.Trusted {
		what = "trusting what the store holds (WithStoreLoss(TrustStore)): units spent before the loss may be spent again"
	}
	l.log.Error("quota: the store lost recorded usage (restart without persistence, flush, eviction or failover); "+what,
		"api", l.api, "owner", who(id), "budgets", f.Budgets, "owner_wide", f.OwnerWide, "store_losses_total", n, "error", f.err())
	for _, b := range f.Budgets {
		l.storeLost(ctx, req.Owner, id.fp, label, b, f.err())
	}
	if l.loss.hook != nil {
		l.loss.hook(ctx, f)
	}
}

// err describes the finding, wrapping ErrStoreLost.
func (f storeLoss) err() error {
	what := "a budget's log or exhaustion mark vanished before its time (eviction, or keys deleted)"
	if f.OwnerWide {
		what = "writes it had acknowledged for this owner are gone (a restart without persistence, a flush, or a failover that missed them)"
	}
	then := "the budgets count as spent until their next reset or for one window"
	if f.Trusted {
		then = "trusting what the store holds"
	}
	return fmt.Errorf("%w: %s; %s", ErrStoreLost, what, then)
}

// recatalog records the limiter's budget definitions again when the store
// lost its catalog of the API with the rest (a flush, a restart without
// persistence): operator overrides went too, so the definitions in force
// here are the best record left. A catalog that survived is left alone.
func (l *Limiter) recatalog(ctx context.Context) {
	apis, err := l.store.List(ctx)
	if err != nil {
		return
	}
	for _, a := range apis {
		if a.Name == l.api && len(a.Budgets) > 0 {
			return
		}
	}
	if err := l.store.DefineBudgets(ctx, l.api, l.budgets); err != nil {
		l.log.Error("quota: store lost recorded usage and recording the budget definitions again failed", "api", l.api, "error", err)
	}
}

func anyLost(us []Usage) bool {
	for i := range us {
		if us[i].StoreLoss {
			return true
		}
	}
	return false
}

func containsDebit(ds []backend.Debit, name string) bool {
	for _, d := range ds {
		if d.Name == name {
			return true
		}
	}
	return false
}

// who names an owner in logs: a named owner's name; for a credential that
// is its own owner (owner is its fingerprint), its label, else the
// fingerprint.
func who(id ident) string {
	if id.label != "" && id.account == id.fp {
		return id.label
	}
	return id.account
}
