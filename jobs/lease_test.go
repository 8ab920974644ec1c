package jobs_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/redisstore"
	"github.com/quotactl/quotactl/quota/sqlitestore"
	"github.com/quotactl/quotactl/quota/storeurl"
)

func TestMain(m *testing.M) {
	testkit.RunChild(map[string]func(string) int{"holder": holderChild})
	redistest.Main(m)
}

// twoHandles returns, per store kind, two handles on one store, as two
// processes have.
func twoHandles(t *testing.T) map[string][2]quota.StateStore {
	mem := quota.NewMemoryStore()
	path := filepath.Join(t.TempDir(), "quota.db")
	var sq [2]quota.StateStore
	for i := range sq {
		st, err := sqlitestore.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		sq[i] = st
	}
	prefix := redistest.Prefix(t)
	return map[string][2]quota.StateStore{
		"memory": {mem, mem},
		"sqlite": sq,
		"redis": {redisstore.New(redistest.Client(t), redisstore.WithPrefix(prefix)),
			redisstore.New(redistest.Client(t), redisstore.WithPrefix(prefix))},
	}
}

type cursor struct {
	N int `json:"n"`
}

// TestLeaseSkipsOverlap: while one scheduler's run holds the job's lease,
// another scheduler on the same store (another process) records a skipped
// run, naming the holder and when its lease expires, in one log line.
func TestLeaseSkipsOverlap(t *testing.T) {
	t.Parallel()
	for name, st := range twoHandles(t) {
		t.Run(name, func(t *testing.T) {
			clock := newClock()
			var logA, logB logBuf
			a := jobs.New(st[0], jobs.WithLogger(logA.logger()), jobs.WithClock(clock.Now), jobs.WithLeaseTTL(time.Minute))
			b := jobs.New(st[1], jobs.WithLogger(logB.logger()), jobs.WithClock(clock.Now), jobs.WithLeaseTTL(time.Minute))
			started, release := make(chan backend.StateLease), make(chan struct{})
			if err := a.Add("ingest", "", func(ctx context.Context, run *jobs.Run) error {
				started <- run.Lease()
				<-release
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			ran := 0
			if err := b.Add("ingest", "", func(context.Context, *jobs.Run) error { ran++; return nil }); err != nil {
				t.Fatal(err)
			}
			done := make(chan jobs.Record)
			go func() {
				rec, err := a.RunOnce(context.Background(), "ingest")
				if err != nil {
					t.Error(err)
				}
				done <- rec
			}()
			held := <-started
			if !strings.HasPrefix(held.Holder, fmt.Sprintf("%s:%d run ", hostname(t), os.Getpid())) || held.Token <= 0 {
				t.Errorf("lease %+v: want holder host:pid run ID", held)
			}
			clock.Add(10 * time.Second)
			rec, err := b.RunOnce(context.Background(), "ingest")
			if err != nil || rec.Outcome != jobs.Skipped || ran != 0 || rec.Holder != held.Holder || !rec.LeaseExpires.Equal(held.Expires) {
				t.Fatalf("overlapping run: %+v, %v, ran %d; want skipped, naming %q until %v", rec, err, ran, held.Holder, held.Expires)
			}
			if lines := logB.lines("run skipped", "holder=", "lease_expires="); len(lines) != 1 || !strings.Contains(lines[0], held.Holder) {
				t.Errorf("log lines for the skipped run: %q", logB.lines())
			}
			if l, found, err := jobs.CurrentLease(context.Background(), st[1], "ingest", clock.Now()); err != nil || !found || l.Holder != held.Holder {
				t.Errorf("CurrentLease = %+v, %v, %v", l, found, err)
			}
			close(release)
			if rec := <-done; rec.Outcome != jobs.OK || rec.Holder != held.Holder {
				t.Errorf("holder's run: %+v", rec)
			}
			if _, found, _ := jobs.CurrentLease(context.Background(), st[1], "ingest", clock.Now()); found {
				t.Error("the lease is still held after the run ended")
			}
			rec, err = b.RunOnce(context.Background(), "ingest")
			if err != nil || rec.Outcome != jobs.OK || ran != 1 {
				t.Errorf("run after the holder ended: %+v, %v", rec, err)
			}
			var outs []jobs.Outcome
			for _, r := range history(t, st[1], "ingest") {
				outs = append(outs, r.Outcome)
			}
			if want := []jobs.Outcome{jobs.OK, jobs.OK, jobs.Skipped}; fmt.Sprint(outs) != fmt.Sprint(want) {
				t.Errorf("history %v, want %v", outs, want)
			}
		})
	}
}

// TestZombieCheckpointRefused: a run that stopped renewing (paused, cut off
// from the store) loses its lease when it expires; the next run takes over
// from the last checkpoint, and the zombie's late checkpoint write is
// refused, so it cannot overwrite the newer one.
func TestZombieCheckpointRefused(t *testing.T) {
	t.Parallel()
	for name, st := range twoHandles(t) {
		t.Run(name, func(t *testing.T) {
			clock := newClock()
			// The lease TTL is a minute on the injected clock; the holder's
			// renewals (every 20s of real time) never come in this test.
			a := jobs.New(st[0], jobs.WithLogger(new(logBuf).logger()), jobs.WithClock(clock.Now), jobs.WithLeaseTTL(time.Minute))
			b := jobs.New(st[1], jobs.WithLogger(new(logBuf).logger()), jobs.WithClock(clock.Now), jobs.WithLeaseTTL(time.Minute))
			paused, resume, lateErr := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			a.Add("ingest", "", func(ctx context.Context, run *jobs.Run) error {
				if err := run.Save(ctx, cursor{1}); err != nil {
					return err
				}
				close(paused)
				<-resume
				err := run.Save(ctx, cursor{99})
				lateErr <- err
				return err
			})
			var resumedAt cursor
			b.Add("ingest", "", func(ctx context.Context, run *jobs.Run) error {
				if _, err := run.Resume(ctx, &resumedAt); err != nil {
					return err
				}
				return run.Save(ctx, cursor{2})
			})
			done := make(chan jobs.Record, 1)
			go func() { rec, _ := a.RunOnce(context.Background(), "ingest"); done <- rec }()
			<-paused

			clock.Add(59 * time.Second)
			if rec, _ := b.RunOnce(context.Background(), "ingest"); rec.Outcome != jobs.Skipped {
				t.Fatalf("run inside the holder's lease: %s", rec.Outcome)
			}
			clock.Add(2 * time.Second) // the lease has expired
			rec, err := b.RunOnce(context.Background(), "ingest")
			if err != nil || rec.Outcome != jobs.OK || resumedAt.N != 1 {
				t.Fatalf("run after the lease expired: %s, %v, resumed at %d; want ok from checkpoint 1", rec.Outcome, err, resumedAt.N)
			}
			close(resume)
			if err := <-lateErr; !errors.Is(err, jobs.ErrLeaseLost) {
				t.Errorf("the zombie's late Save = %v, want ErrLeaseLost", err)
			}
			if rec := <-done; rec.Outcome != jobs.Failed || !strings.Contains(rec.Error, "lease lost") {
				t.Errorf("zombie's run: %s %q", rec.Outcome, rec.Error)
			}
			cp, found, err := jobs.LoadCheckpoint(context.Background(), st[1], "ingest")
			if err != nil || !found || string(cp.Cursor) != `{"n":2}` {
				t.Errorf("checkpoint %s, %v, %v; want the new holder's n=2", cp.Cursor, found, err)
			}
		})
	}
}

// TestLeaseRenewed: a run longer than the lease TTL keeps its lease by
// renewing it; another scheduler meanwhile is skipped, and runs once the
// holder ends.
func TestLeaseRenewed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := quota.NewMemoryStore()
		a := jobs.New(store, jobs.WithLogger(new(logBuf).logger()), jobs.WithLeaseTTL(30*time.Second))
		b := jobs.New(store, jobs.WithLogger(new(logBuf).logger()), jobs.WithLeaseTTL(30*time.Second))
		a.Add("ingest", "", func(ctx context.Context, run *jobs.Run) error {
			<-time.After(2 * time.Minute)
			return run.Save(ctx, cursor{1})
		})
		b.Add("ingest", "", func(context.Context, *jobs.Run) error { return nil })
		done := make(chan jobs.Record, 1)
		go func() { rec, _ := a.RunOnce(context.Background(), "ingest"); done <- rec }()
		synctest.Wait()
		advance(100 * time.Second)
		rec, err := b.RunOnce(context.Background(), "ingest")
		if err != nil || rec.Outcome != jobs.Skipped || !rec.LeaseExpires.After(time.Now()) {
			t.Fatalf("run at 100s into a 2-minute run with a 30s lease: %s (lease until %v), %v; want skipped", rec.Outcome, rec.LeaseExpires, err)
		}
		advance(time.Minute)
		if rec := <-done; rec.Outcome != jobs.OK {
			t.Errorf("the long run: %s %q", rec.Outcome, rec.Error)
		}
		if rec, err := b.RunOnce(context.Background(), "ingest"); err != nil || rec.Outcome != jobs.OK {
			t.Errorf("run after the long one: %s, %v", rec.Outcome, err)
		}
	})
}

// TestLeaseLostCancelsRun: a run whose lease is taken over (here by hand:
// released and granted to another holder) learns it at its next renewal;
// its context is cancelled with ErrLeaseLost as the cause.
func TestLeaseLostCancelsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := quota.NewMemoryStore()
		var logs logBuf
		s := jobs.New(store, jobs.WithLogger(logs.logger()), jobs.WithLeaseTTL(30*time.Second))
		leased := make(chan backend.StateLease, 1)
		s.Add("ingest", "", func(ctx context.Context, run *jobs.Run) error {
			leased <- run.Lease()
			<-ctx.Done()
			return context.Cause(ctx)
		})
		done := make(chan jobs.Record, 1)
		go func() { rec, _ := s.RunOnce(context.Background(), "ingest"); done <- rec }()
		l := <-leased
		ctx := context.Background()
		if err := store.ReleaseLease(ctx, &backend.StateLeaseRequest{Key: l.Key, Token: l.Token}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.AcquireLease(ctx, &backend.StateLeaseRequest{Key: l.Key, Holder: "other-host:1 run x", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		advance(10 * time.Second)
		rec := <-done
		if rec.Outcome != jobs.Cancelled || !strings.Contains(rec.Error, "lease lost") {
			t.Errorf("run: %s %q; want cancelled, lease lost", rec.Outcome, rec.Error)
		}
		if len(logs.lines("lost its lease")) != 1 {
			t.Errorf("logs: %q", logs.lines())
		}
		if cur, found, _ := jobs.CurrentLease(ctx, store, "ingest", time.Now()); !found || cur.Holder != "other-host:1 run x" {
			t.Errorf("the new holder's lease was touched: %+v", cur)
		}
	})
}

// TestLeaseLostNamedInRecord: a job that returns what its calls return
// once cancelled (ctx.Err(), "context canceled") after its lease was lost
// is recorded, and answered, as stopped by the lost lease: the record says
// so and RunOnce's error wraps ErrLeaseLost, so an operator can tell it
// from a SIGTERM.
func TestLeaseLostNamedInRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := quota.NewMemoryStore()
		var logs logBuf
		s := jobs.New(store, jobs.WithLogger(logs.logger()), jobs.WithLeaseTTL(30*time.Second))
		leased := make(chan backend.StateLease, 1)
		s.Add("ingest", "", func(ctx context.Context, run *jobs.Run) error {
			leased <- run.Lease()
			<-ctx.Done()
			return fmt.Errorf("fetch page 3: %w", ctx.Err())
		})
		type result struct {
			rec jobs.Record
			err error
		}
		done := make(chan result, 1)
		go func() { rec, err := s.RunOnce(context.Background(), "ingest"); done <- result{rec, err} }()
		l := <-leased
		ctx := context.Background()
		if err := store.ReleaseLease(ctx, &backend.StateLeaseRequest{Key: l.Key, Token: l.Token}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.AcquireLease(ctx, &backend.StateLeaseRequest{Key: l.Key, Holder: "other-host:1 run x", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		advance(10 * time.Second)
		r := <-done
		if r.rec.Outcome != jobs.Cancelled || !strings.Contains(r.rec.Error, "lease lost") || !strings.Contains(r.rec.Error, "fetch page 3") {
			t.Errorf("record: %s %q; want cancelled, naming the lost lease and the job's error", r.rec.Outcome, r.rec.Error)
		}
		if !errors.Is(r.err, jobs.ErrLeaseLost) || !errors.Is(r.err, context.Canceled) {
			t.Errorf("RunOnce = %v; want it to wrap ErrLeaseLost and context.Canceled", r.err)
		}
	})
}

// TestQuietExhaustion: a job every 15 minutes over a daily budget spent at
// the first tick records no run until the reset, and logs one line per
// window; after the reset it runs again.
func TestQuietExhaustion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := quota.NewMemoryStore()
		l, err := quota.New(store, "youtube", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Daily(time.UTC)}})
		if err != nil {
			t.Fatal(err)
		}
		var logs logBuf
		s := jobs.New(store, jobs.WithLogger(logs.logger()), jobs.WithLocation(time.UTC))
		runs := 0
		if err := s.Add("trending", "*/15 * * * *", func(ctx context.Context, run *jobs.Run) error {
			runs++
			for {
				if _, err := take(ctx, l, "units", 4); err != nil {
					return err
				}
			}
		}); err != nil {
			t.Fatal(err)
		}
		stop := startRun(s)
		advance(26 * time.Hour)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h := history(t, store, "trending")
		if len(h) != 2 || runs != 2 {
			t.Fatalf("%d runs, %d recorded over 26 hours of 15-minute ticks; want 2: one a day", runs, len(h))
		}
		for i, start := range []time.Time{epoch.Add(24 * time.Hour), epoch.Add(15 * time.Minute)} {
			if !h[i].Start.Equal(start) || h[i].Outcome != jobs.Exhausted || h[i].Spent["youtube/units"] != 8 {
				t.Errorf("run %d: %s at %v, spent %v; want exhausted at %v, spent 8", i, h[i].Outcome, h[i].Start, h[i].Spent, start)
			}
		}
		if lines := logs.lines("waiting for capacity"); len(lines) != 2 || !strings.Contains(lines[0], "until=2000-01-02T00:00:00") {
			t.Errorf("waiting lines: %q; want one per window", lines)
		}
		w, found, err := jobs.LoadWaiting(context.Background(), store, "trending", time.Now())
		if err != nil || !found || !w.Until.Equal(epoch.Add(48*time.Hour)) || w.Budget != "youtube/units" {
			t.Errorf("waiting mark %+v, %v, %v", w, found, err)
		}
	})
}

// TestWaitingEndsEarly: with WithLimiter, a job waiting for capacity runs as
// soon as the budget can pay again (here a reset), before the mark's time;
// without it, it waits.
func TestWaitingEndsEarly(t *testing.T) {
	t.Parallel()
	clock := newClock()
	store := quota.NewMemoryStore()
	l := newLimiter(t, store, clock.Now, "units", 3)
	spend := func(ctx context.Context, run *jobs.Run) error {
		for {
			if _, err := take(ctx, l, "units", 1); err != nil {
				return err
			}
		}
	}
	s := jobs.New(store, jobs.WithLogger(new(logBuf).logger()), jobs.WithClock(clock.Now))
	s.Add("with", "", spend, jobs.WithLimiter(l, key))
	s.Add("without", "", spend)
	ctx := context.Background()
	for _, name := range []string{"with", "without"} {
		if err := l.Adjust(ctx, key, "units", 0); err != nil {
			t.Fatal(err)
		}
		if rec, _ := s.RunOnce(ctx, name); rec.Outcome != jobs.Exhausted {
			t.Fatalf("%s: first run %s", name, rec.Outcome)
		}
		if rec, _ := s.RunOnce(ctx, name); rec.Outcome != jobs.Waiting || !rec.Exhausted.RetryAt.Equal(clock.Now().Add(time.Hour)) {
			t.Fatalf("%s: second run %s %+v; want waiting an hour", name, rec.Outcome, rec.Exhausted)
		}
	}
	if err := l.Adjust(ctx, key, "units", 0); err != nil {
		t.Fatal(err)
	}
	if rec, _ := s.RunOnce(ctx, "with"); rec.Outcome != jobs.Exhausted || rec.Spent["youtube/units"] != 3 {
		t.Errorf("with a limiter, after the reset: %s, spent %v; want a run", rec.Outcome, rec.Spent)
	}
	if rec, _ := s.RunOnce(ctx, "without"); rec.Outcome != jobs.Waiting {
		t.Errorf("without a limiter, after the reset: %s; want waiting", rec.Outcome)
	}
}

func hostname(t *testing.T) string {
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// holderChild is the holder child's main: a process that takes the job's
// lease, saves a checkpoint, says "saved" and blocks until killed. arg is
// "CLOCK STORE_URL", its fixed instant (RFC 3339) and its store.
func holderChild(arg string) int {
	clock, u, _ := strings.Cut(arg, " ")
	store, err := storeurl.Open(context.Background(), u)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	at, err := time.Parse(time.RFC3339Nano, clock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s := jobs.New(store.(quota.StateStore), jobs.WithClock(func() time.Time { return at }), jobs.WithLeaseTTL(time.Minute))
	s.Add("ingest", "", func(ctx context.Context, run *jobs.Run) error {
		if err := run.Save(ctx, cursor{3}); err != nil {
			return err
		}
		fmt.Println("saved")
		select {}
	})
	_, err = s.RunOnce(context.Background(), "ingest")
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// TestHolderKilled: a process holding the job's lease is killed with
// SIGKILL mid-run. Its lease blocks the next run until it expires (on the
// injected clock: no waiting), then the next run starts and resumes from the
// dead holder's checkpoint. On SQLite and on Redis.
func TestHolderKilled(t *testing.T) {
	t.Parallel()
	_, addr := redistest.Shared(t)
	for name, u := range map[string]string{
		"sqlite": storeurl.SQLiteURL(filepath.Join(t.TempDir(), "quota.db")),
		"redis":  "redis://" + addr + "/0?prefix=" + url.QueryEscape(redistest.Prefix(t)),
	} {
		t.Run(name, func(t *testing.T) {
			clock := newClock()
			cmd := testkit.Child(t, "holder", clock.Now().Format(time.RFC3339Nano)+" "+u)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil || line != "saved\n" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("child said %q, %v", line, err)
			}
			if err := cmd.Process.Kill(); err != nil { // SIGKILL: no release, no last write
				t.Fatal(err)
			}
			cmd.Wait()

			st, err := storeurl.Open(context.Background(), u)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var resumed cursor
			found := false
			s := jobs.New(st.(quota.StateStore), jobs.WithLogger(new(logBuf).logger()), jobs.WithClock(clock.Now), jobs.WithLeaseTTL(time.Minute))
			s.Add("ingest", "", func(ctx context.Context, run *jobs.Run) error {
				var err error
				found, err = run.Resume(ctx, &resumed)
				return err
			})
			clock.Add(30 * time.Second)
			rec, err := s.RunOnce(context.Background(), "ingest")
			dead := fmt.Sprintf(":%d run ", cmd.Process.Pid)
			if err != nil || rec.Outcome != jobs.Skipped || !strings.Contains(rec.Holder, dead) || !rec.LeaseExpires.Equal(clock.Now().Add(30*time.Second)) {
				t.Fatalf("run while the dead holder's lease lives: %+v, %v; want skipped naming pid %d", rec, err, cmd.Process.Pid)
			}
			clock.Add(30 * time.Second)
			rec, err = s.RunOnce(context.Background(), "ingest")
			if err != nil || rec.Outcome != jobs.OK || !found || resumed.N != 3 {
				t.Fatalf("run after the lease expired: %s, %v, resumed %v at %d; want ok from the checkpoint n=3", rec.Outcome, err, found, resumed.N)
			}
			var h []string
			for _, r := range history(t, st.(quota.StateStore), "ingest") {
				h = append(h, string(r.Outcome))
			}
			if strings.Join(h, ",") != "ok,skipped" {
				t.Errorf("history %v: want ok, skipped (the killed run recorded nothing)", h)
			}
		})
	}
}
