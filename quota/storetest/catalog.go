package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

func (s suite) isolation(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	b := quota.Budget{Name: "units", Limit: 5, Window: quota.Sliding(time.Hour)}
	yt, _ := quota.New(st, "youtube", []quota.Budget{b}, quota.WithClock(clock.Now))
	gh, _ := quota.New(st, "github", []quota.Budget{b}, quota.WithClock(clock.Now))
	other := quota.Credential{Secret: "another-secret-key"}
	mustTake(t, yt, key, quota.Units("units", 5))
	mustRefuse(t, yt, key, quota.Units("units", 1))
	mustTake(t, gh, key, quota.Units("units", 5))
	mustTake(t, yt, other, quota.Units("units", 5))
	if us, err := gh.Status(ctx, other); err != nil || us[0].Used != 0 {
		t.Fatalf("github/units for another credential = %+v, %v; want unused", us, err)
	}
}

func (s suite) catalog(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	la, _ := time.LoadLocation("America/Los_Angeles")
	budgets := []quota.Budget{
		{Name: "units", Limit: 10000, Window: quota.Daily(la)},
		{Name: "search", Limit: 100, Window: quota.Sliding(24 * time.Hour)},
	}
	l, err := quota.New(st, "youtube", budgets, quota.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	mustTake(t, l, key, quota.Units("units", 3))
	mustTake(t, l, quota.Credential{Secret: "second-key-xyz"}, quota.Units("units", 1))

	// Another process, with no configuration, sees the budgets and labels.
	l2, err := quota.Load(ctx, st, "youtube", quota.WithClock(clock.Now))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	got := l2.Budgets()
	slices.SortFunc(got, func(a, b quota.Budget) int { return cmpStr(a.Name, b.Name) })
	if len(got) != 2 || got[0].Name != "search" || got[0].Limit != 100 || got[0].Window.String() != "sliding:24h0m0s" ||
		got[1].Name != "units" || got[1].Window.String() != "daily:America/Los_Angeles" {
		t.Fatalf("loaded budgets = %v", got)
	}
	r := mustTake(t, l2, quota.Credential{Label: "key-1"}, quota.Units("units", 2))
	if r.Usage[0].Used != 5 {
		t.Fatalf("label-only take: used %d, want 5 (same credential)", r.Usage[0].Used)
	}
	if _, err := l2.Take(ctx, quota.Credential{Label: "nobody"}, quota.Units("units", 1)); !errors.Is(err, quota.ErrUnknownCredential) {
		t.Fatalf("unknown label: %v, want ErrUnknownCredential", err)
	}
	apis, err := st.List(ctx)
	if err != nil || len(apis) != 1 || apis[0].Name != "youtube" || len(apis[0].Credentials) != 2 {
		t.Fatalf("List = %+v, %v", apis, err)
	}
	fp := quota.DefaultFingerprint(key.Secret)
	var labels []string
	for _, c := range apis[0].Credentials {
		if c.ID == key.Secret || c.ID == "second-key-xyz" {
			t.Fatalf("the store lists a raw credential")
		}
		if c.ID == fp {
			labels = append(labels, c.Label)
		}
	}
	if !slices.Equal(labels, []string{"key-1"}) {
		t.Fatalf("labels of the fingerprint = %v, want [key-1]", labels)
	}
	if err := st.DeleteBudget(ctx, "youtube", "search"); err != nil {
		t.Fatal(err)
	}
	if apis, _ := st.List(ctx); len(apis[0].Budgets) != 1 {
		t.Fatalf("after DeleteBudget: %+v", apis[0].Budgets)
	}
	if err := st.DeleteBudget(ctx, "youtube", "search"); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("DeleteBudget of a missing budget = %v, want ErrNotFound", err)
	}
	if _, err := quota.Load(ctx, st, "nope"); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("Load of an unknown api = %v, want ErrNotFound", err)
	}
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func credentials(t *testing.T, st quota.Store, api string) map[string]quota.CredentialInfo {
	t.Helper()
	apis, err := st.List(context.Background())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	out := map[string]quota.CredentialInfo{}
	for _, a := range apis {
		if a.Name == api {
			for _, c := range a.Credentials {
				out[c.ID] = c
			}
		}
	}
	return out
}

// ownersShare: the credentials of one owner share its budgets, named on the
// credential or through WithOwner; the store lists them under the owner.
func (s suite) ownersShare(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	b := quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}
	l := s.limiter(t, st, clock, b)
	k1 := quota.Credential{Secret: "AIzaSy-project-key-1", Label: "yt-key-1", Owner: "my-project"}
	k2 := quota.Credential{Secret: "AIzaSy-project-key-2", Label: "yt-key-2", Owner: "my-project"}
	r := mustTake(t, l, k1, quota.Units("units", 4))
	if r.Owner != "my-project" || !strings.HasPrefix(r.ID(), "api/my-project/") {
		t.Fatalf("reservation owner %q, ID %q; want my-project", r.Owner, r.ID())
	}
	if r := mustTake(t, l, k2, quota.Units("units", 4)); r.Usage[0].Used != 8 {
		t.Fatalf("second key of the project: used %d, want 8 (shared)", r.Usage[0].Used)
	}
	mustRefuse(t, l, k1, quota.Units("units", 3))
	// A third key through a limiter whose default owner is the project.
	l3, err := quota.New(st, "api", []quota.Budget{b}, quota.WithClock(clock.Now), quota.WithOwner("my-project"))
	if err != nil {
		t.Fatal(err)
	}
	if r := mustTake(t, l3, quota.Credential{Secret: "AIzaSy-project-key-3"}, quota.Units("units", 2)); r.Usage[0].Used != 10 {
		t.Fatalf("WithOwner key: used %d, want 10", r.Usage[0].Used)
	}
	// A refund by ID from another process gives back to the owner.
	p, err := quota.ParseReservationID(r.ID())
	if err != nil || p.Owner != "my-project" {
		t.Fatalf("ParseReservationID(%q) = %+v, %v", r.ID(), p, err)
	}
	if err := l3.Refund(ctx, p); err != nil {
		t.Fatalf("refund by ID: %v", err)
	}
	if got := used(t, l, k2, "units"); got != 6 {
		t.Fatalf("after refund: used %d, want 6", got)
	}
	// Another credential, its own owner, is untouched.
	if got := used(t, l, quota.Credential{Secret: "AIzaSy-other"}, "units"); got != 0 {
		t.Fatalf("another owner: used %d, want 0", got)
	}
	cs := credentials(t, st, "api")
	n := 0
	for _, c := range cs {
		if c.Owner == "my-project" {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("credentials listed under my-project: %d of %+v, want 3", n, cs)
	}
	if _, err := quota.New(st, "api", []quota.Budget{b}, quota.WithOwner("my project")); !errors.Is(err, quota.ErrInvalid) {
		t.Fatalf("bad owner name: %v, want ErrInvalid", err)
	}
}

// rotation: a new secret rotated in under a label continues the old one's
// usage, and a process still on the old secret meters the same account.
func (s suite) rotation(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	b := quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}
	l := s.limiter(t, st, clock, b)
	oldKey := quota.Credential{Secret: "AIzaSy-before-rotation", Label: "yt-key-1"}
	r := mustTake(t, l, oldKey, quota.Units("units", 6))
	account := r.Owner
	newKey := quota.Credential{Secret: "AIzaSy-after-rotation", Label: "yt-key-1"}
	info, err := l.Rotate(ctx, "yt-key-1", quota.Credential{Secret: newKey.Secret})
	if err != nil {
		t.Fatalf("Rotate: %v", err)
	}
	if info.Label != "yt-key-1" || info.Owner != account || info.ID == r.Credential {
		t.Fatalf("rotated record %+v; want label yt-key-1 under %s", info, account)
	}
	// A fresh process with the new secret and the label: same account.
	l2 := s.limiter(t, st, clock, b)
	if r := mustTake(t, l2, newKey, quota.Units("units", 3)); r.Usage[0].Used != 9 || r.Owner != account {
		t.Fatalf("new key after rotation: used %d on %q, want 9 on %s", r.Usage[0].Used, r.Owner, account)
	}
	// The old key, still in use somewhere during the rollout (no label now).
	l3 := s.limiter(t, st, clock, b)
	if r := mustTake(t, l3, quota.Credential{Secret: oldKey.Secret}, quota.Units("units", 1)); r.Usage[0].Used != 10 {
		t.Fatalf("old key after rotation: used %d, want 10", r.Usage[0].Used)
	}
	mustRefuse(t, l2, newKey, quota.Units("units", 1))
	// The new secret given without a label is named by the label the store
	// holds for it, so the refusal an operator reads says "yt-key-1".
	l4 := s.limiter(t, st, clock, b)
	var ex *quota.ExhaustedError
	if _, err := l4.Take(ctx, quota.Credential{Secret: newKey.Secret}, quota.Units("units", 1)); !errors.As(err, &ex) || ex.Credential != "yt-key-1" {
		t.Fatalf("unlabelled take of the rotated key: %v, want a refusal naming yt-key-1", err)
	}
	cs := credentials(t, st, "api")
	if c := cs[r.Credential]; c.Label != "" || c.Owner != account {
		t.Fatalf("old record after rotation: %+v", c)
	}
	if _, err := l.Rotate(ctx, "nobody", quota.Credential{Secret: "x"}); !errors.Is(err, quota.ErrUnknownCredential) {
		t.Fatalf("rotate an unknown label: %v, want ErrUnknownCredential", err)
	}
}

// rotateOntoRecorded: a rotation onto a secret the catalog already records
// under an account of its own is refused (ErrInvalid, naming it), and
// nothing changes: that credential keeps its label and its usage counts.
// Rotating back onto the old key (the unlabelled predecessor, same account)
// stays allowed.
func (s suite) rotateOntoRecorded(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	b := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}
	l := s.limiter(t, st, clock, b)
	a := quota.Credential{Secret: "AIzaSy-rotate-onto-a", Label: "ka"}
	kb := quota.Credential{Secret: "AIzaSy-rotate-onto-b", Label: "kb"}
	ra := mustTake(t, l, a, quota.Units("units", 10))
	rb := mustTake(t, l, kb, quota.Units("units", 20))
	before := credentials(t, st, "api")
	for _, from := range []string{"ka", ra.Credential} {
		_, err := l.Rotate(ctx, from, quota.Credential{Secret: kb.Secret})
		if !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), `"kb"`) || strings.Contains(err.Error(), kb.Secret) {
			t.Fatalf("rotate %s onto kb's secret: %v; want ErrInvalid naming kb", from, err)
		}
	}
	if after := credentials(t, st, "api"); !reflect.DeepEqual(before, after) {
		t.Fatalf("a refused rotation changed the catalog:\nbefore %+v\nafter  %+v", before, after)
	}
	// kb's usage still counts against it, in this process and a fresh one.
	for _, lim := range []*quota.Limiter{l, s.limiter(t, st, clock, b)} {
		if got := used(t, lim, quota.Credential{Secret: kb.Secret}, "units"); got != 20 {
			t.Fatalf("kb used %d after the refused rotation, want 20", got)
		}
		mustRefuse(t, lim, quota.Credential{Secret: kb.Secret}, quota.Units("units", 81))
	}
	if r := mustTake(t, s.limiter(t, st, clock, b), quota.Credential{Secret: kb.Secret}, quota.Units("units", 80)); r.Owner != rb.Owner || r.Usage[0].Used != 100 {
		t.Fatalf("kb after the refused rotation: used %d on %q, want 100 on %s", r.Usage[0].Used, r.Owner, rb.Owner)
	}
	// Rotating ka to a new key and back to its old one keeps its account.
	if _, err := l.Rotate(ctx, "ka", quota.Credential{Secret: "AIzaSy-rotate-onto-c"}); err != nil {
		t.Fatalf("rotate ka to a new secret: %v", err)
	}
	info, err := l.Rotate(ctx, "ka", quota.Credential{Secret: a.Secret})
	if err != nil || info.ID != ra.Credential || info.Owner != ra.Owner || info.Label != "ka" {
		t.Fatalf("rotate ka back to its old key = %+v, %v; want %s labelled ka under %s", info, err, ra.Credential, ra.Owner)
	}
	if got := used(t, s.limiter(t, st, clock, b), a, "units"); got != 10 {
		t.Fatalf("ka used %d after rotating back, want 10", got)
	}
}

// labelCollision: a label held by one secret, reused for another, is
// refused before anything is charged, with a message naming the fix.
func (s suite) labelCollision(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	b := quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}
	l := s.limiter(t, st, clock, b)
	mustTake(t, l, quota.Credential{Secret: "AIzaSy-first", Label: "yt-key-1"}, quota.Units("units", 2))
	other := quota.Credential{Secret: "AIzaSy-DIFFERENT", Label: "yt-key-1"}
	for _, lim := range []*quota.Limiter{l, s.limiter(t, st, clock, b)} {
		_, err := lim.Take(ctx, other, quota.Units("units", 1))
		if !errors.Is(err, quota.ErrLabelTaken) || !strings.Contains(err.Error(), "credential rotate") || strings.Contains(err.Error(), other.Secret) {
			t.Fatalf("reused label: %v; want ErrLabelTaken naming the rotate fix", err)
		}
	}
	if got := used(t, l, quota.Credential{Secret: "AIzaSy-DIFFERENT"}, "units"); got != 0 {
		t.Fatalf("the refused credential was charged %d", got)
	}
	if got := used(t, l, quota.Credential{Label: "yt-key-1"}, "units"); got != 2 {
		t.Fatalf("the label's credential: used %d, want 2", got)
	}
	n := 0
	for _, c := range credentials(t, st, "api") {
		if c.Label == "yt-key-1" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d credentials labelled yt-key-1, want 1", n)
	}
}

// forget removes a credential from the catalog and keeps its owner's usage.
func (s suite) forget(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	b := quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}
	l := s.limiter(t, st, clock, b)
	k1 := quota.Credential{Secret: "AIzaSy-forget-1", Label: "old", Owner: "proj"}
	k2 := quota.Credential{Secret: "AIzaSy-forget-2", Label: "new", Owner: "proj"}
	mustTake(t, l, k1, quota.Units("units", 5))
	mustTake(t, l, k2, quota.Units("units", 1))
	info, err := l.Forget(ctx, "old")
	if err != nil || info.Owner != "proj" {
		t.Fatalf("Forget = %+v, %v", info, err)
	}
	if _, ok := credentials(t, st, "api")[info.ID]; ok {
		t.Fatal("forgotten credential still listed")
	}
	if got := used(t, l, k2, "units"); got != 6 {
		t.Fatalf("owner's usage after forget: %d, want 6", got)
	}
	if _, err := l.Take(ctx, quota.Credential{Label: "old"}, quota.Units("units", 1)); !errors.Is(err, quota.ErrUnknownCredential) {
		t.Fatalf("take by a forgotten label: %v, want ErrUnknownCredential", err)
	}
	if _, err := l.Forget(ctx, "old"); !errors.Is(err, quota.ErrUnknownCredential) {
		t.Fatalf("forget twice: %v, want ErrUnknownCredential", err)
	}
}

// relabel renames a credential; the new label must be free.
func (s suite) relabel(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	b := quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}
	l := s.limiter(t, st, clock, b)
	mustTake(t, l, quota.Credential{Secret: "AIzaSy-relabel-1", Label: "a"}, quota.Units("units", 3))
	mustTake(t, l, quota.Credential{Secret: "AIzaSy-relabel-2", Label: "b"}, quota.Units("units", 1))
	if _, err := l.Relabel(ctx, "a", "b"); !errors.Is(err, quota.ErrLabelTaken) {
		t.Fatalf("relabel onto a taken label: %v, want ErrLabelTaken", err)
	}
	info, err := l.Relabel(ctx, "a", "yt-key-9")
	if err != nil || info.Label != "yt-key-9" {
		t.Fatalf("Relabel = %+v, %v", info, err)
	}
	if got := used(t, l, quota.Credential{Label: "yt-key-9"}, "units"); got != 3 {
		t.Fatalf("relabelled credential: used %d, want 3", got)
	}
	if _, err := l.Take(ctx, quota.Credential{Label: "a"}, quota.Units("units", 1)); !errors.Is(err, quota.ErrUnknownCredential) {
		t.Fatalf("old label: %v, want ErrUnknownCredential", err)
	}
}

// catalogRace: processes registering different secrets under one label at
// once: exactly one gets it, the others are refused, nothing is charged for
// them.
func (s suite) catalogRace(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	b := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		l := s.limiter(t, st, clock, b)
		wg.Go(func() {
			_, errs[i] = l.Take(ctx, quota.Credential{Secret: fmt.Sprintf("AIzaSy-race-%d", i), Label: "shared"}, quota.Units("units", 1))
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, quota.ErrLabelTaken):
			t.Fatalf("racing registration: %v", err)
		}
	}
	labelled := 0
	for _, c := range credentials(t, st, "api") {
		if c.Label == "shared" {
			labelled++
		}
	}
	if ok != 1 || labelled != 1 {
		t.Fatalf("%d takes succeeded, %d credentials labelled; want 1 and 1", ok, labelled)
	}
}

// registerOwnerIfNew: OpRegister's OwnerIfNew names the owner of a
// credential the catalog does not record yet, and never replaces a
// recorded account (an owner, the credential's own, a legacy record's);
// an Owner given wins over it. Racing registrations, one naming an owner
// and the others only OwnerIfNew, end with that owner whatever the order:
// the check and the write are one atomic step.
func (s suite) registerOwnerIfNew(t *testing.T) {
	ctx := context.Background()
	st := s.store(t)
	fp := func(secret string) string { return quota.Fingerprint([]byte("storetest"), secret) }
	register := func(u backend.CredentialUpdate) quota.CredentialInfo {
		t.Helper()
		u.Op = backend.OpRegister
		info, err := st.UpdateCredential(ctx, "api", u)
		if err != nil {
			t.Fatalf("UpdateCredential(%+v): %v", u, err)
		}
		return info
	}
	const dflt = "unnamed-project"
	fresh, named, own, legacy, migrated := fp("fresh"), fp("named"), fp("own"), fp("legacy"), fp("migrated")
	if info := register(backend.CredentialUpdate{ID: fresh, Label: "k-fresh", OwnerIfNew: dflt}); info.Owner != dflt || info.Label != "k-fresh" {
		t.Fatalf("a new credential registered with OwnerIfNew: %+v, want owner %s", info, dflt)
	}
	register(backend.CredentialUpdate{ID: named, Owner: "proj-x"})
	if info := register(backend.CredentialUpdate{ID: named, Label: "k-named", OwnerIfNew: dflt}); info.Owner != "proj-x" || info.Label != "k-named" {
		t.Fatalf("OwnerIfNew over a recorded owner: %+v, want proj-x kept (the label set)", info)
	}
	register(backend.CredentialUpdate{ID: own})
	if info := register(backend.CredentialUpdate{ID: own, OwnerIfNew: dflt}); info.Owner != own {
		t.Fatalf("OwnerIfNew over a credential that is its own owner: %+v, want it kept", info)
	}
	register(backend.CredentialUpdate{ID: legacy, Label: "k-legacy", Owner: "proj-l"})
	if info := register(backend.CredentialUpdate{ID: migrated, Legacy: legacy, OwnerIfNew: dflt}); info.Owner != "proj-l" || info.Label != "k-legacy" {
		t.Fatalf("OwnerIfNew for a credential recorded under its legacy fingerprint: %+v, want the legacy record's proj-l and label", info)
	}
	if info := register(backend.CredentialUpdate{ID: fresh, Owner: "proj-y", OwnerIfNew: dflt}); info.Owner != "proj-y" {
		t.Fatalf("Owner and OwnerIfNew both given: %+v, want the Owner proj-y", info)
	}
	if _, err := st.UpdateCredential(ctx, "api", backend.CredentialUpdate{Op: backend.OpRegister, ID: fp("bad"), OwnerIfNew: "my project"}); !errors.Is(err, quota.ErrInvalid) {
		t.Fatalf("OwnerIfNew %q: %v, want ErrInvalid", "my project", err)
	}
	want := map[string]string{fresh: "proj-y", named: "proj-x", own: own, legacy: "proj-l", migrated: "proj-l"}
	cs := credentials(t, st, "api")
	for id, owner := range want {
		if cs[id].Owner != owner {
			t.Errorf("credential %s listed under %q, want %q", id, cs[id].Owner, owner)
		}
	}
	if len(cs) != len(want) {
		t.Errorf("catalog %+v, want %d credentials", cs, len(want))
	}

	const n = 8
	for round := range 4 {
		id := fp(fmt.Sprintf("race-%d", round))
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			u := backend.CredentialUpdate{Op: backend.OpRegister, ID: id, OwnerIfNew: dflt}
			if i == round%n {
				u = backend.CredentialUpdate{Op: backend.OpRegister, ID: id, Owner: "proj-x"}
			}
			wg.Go(func() { _, errs[i] = st.UpdateCredential(ctx, "api", u) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("racing registration: %v", err)
			}
		}
		if c := credentials(t, st, "api")[id]; c.Owner != "proj-x" {
			t.Fatalf("round %d: racing registrations left %+v, want owner proj-x", round, c)
		}
	}
}
