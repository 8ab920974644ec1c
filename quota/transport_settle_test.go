package quota_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
)

// lineCost is an upstream whose calls cost what the request's "max"
// query parameter bounds and what the response's last line says: the
// body is n lines "chunk", then "cost N". It counts what it billed.
type lineCost struct {
	mu     sync.Mutex
	billed int64
}

func (u *lineCost) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cost, _ := strconv.ParseInt(r.URL.Query().Get("cost"), 10, 64)
	lines, _ := strconv.Atoi(r.URL.Query().Get("lines"))
	u.mu.Lock()
	u.billed += cost
	u.mu.Unlock()
	for range lines {
		fmt.Fprintln(w, "chunk")
	}
	fmt.Fprintf(w, "cost %d\n", cost)
}

// linePricer estimates a call at its "max" parameter of budget "tokens"
// (and 1 of "requests"), and reads the actual from the last line.
type linePricer struct{}

func (linePricer) Price(req *http.Request) (quota.Charge, error) {
	est, err := linePricer{}.EstimateCall(req)
	return est.Charge, err
}

func (linePricer) EstimateCall(req *http.Request) (quota.Estimate, error) {
	max, err := strconv.ParseInt(req.URL.Query().Get("max"), 10, 64)
	if err != nil {
		return quota.Estimate{}, err
	}
	return quota.Estimate{
		Charge: quota.Charge{Method: "gen", Units: map[string]int64{"tokens": max, "requests": 1}},
		Actual: func(*http.Response) quota.Actual { return &lastLine{} },
	}, nil
}

// lastLine finds "cost N" in a body fed to it.
type lastLine struct{ buf bytes.Buffer }

func (l *lastLine) Write(p []byte) (int, error) { return l.buf.Write(p) }

func (l *lastLine) Units() (map[string]int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()))
	for sc.Scan() {
		if n, ok := strings.CutPrefix(sc.Text(), "cost "); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			return map[string]int64{"tokens": v}, err
		}
	}
	return nil, errors.New("no cost line yet")
}

// settleEvents collects EventSettle events.
type settleEvents struct {
	mu sync.Mutex
	es []quota.Event
}

func (s *settleEvents) Observe(e quota.Event) {
	if e.Kind == quota.EventSettle {
		s.mu.Lock()
		s.es = append(s.es, e)
		s.mu.Unlock()
	}
}

func (s *settleEvents) last(t *testing.T) quota.Event {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.es) == 0 {
		t.Fatal("no settle event")
	}
	return s.es[len(s.es)-1]
}

// TestTransportSettles: a call estimated at its bound settles to its
// actual once its body is read to the end, or closed after its cost line;
// one closed before its cost keeps the estimate; one that cost more than
// its estimate has the excess counted on top, never lost. The store's
// count is what the upstream billed, whatever the order of those calls.
func TestTransportSettles(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	up := &lineCost{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	ev := &settleEvents{}
	lim, err := quota.New(quota.NewMemoryStore(), "gen", []quota.Budget{
		{Name: "tokens", Limit: 10_000, Window: quota.Sliding(time.Minute)},
		{Name: "requests", Limit: 100, Window: quota.Sliding(time.Minute)},
	}, quota.WithClock(clk.Now), quota.WithObserver(ev))
	if err != nil {
		t.Fatal(err)
	}
	cred := quota.Credential{Secret: "k", Label: "job"}
	client := &http.Client{Transport: quota.NewTransport(lim, linePricer{}, quota.WithCredential(cred))}
	used := func() int64 {
		t.Helper()
		lim.Flush(t.Context())
		us, err := lim.Status(t.Context(), cred)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range us {
			if u.Budget == "tokens" {
				return u.Used
			}
		}
		t.Fatal("no tokens budget")
		return 0
	}
	call := func(max, cost, lines int, read func(io.Reader)) {
		t.Helper()
		resp, err := client.Get(fmt.Sprintf("%s/gen?max=%d&cost=%d&lines=%d", srv.URL, max, cost, lines))
		if err != nil {
			t.Fatal(err)
		}
		read(resp.Body)
		resp.Body.Close()
	}
	all := func(r io.Reader) { io.Copy(io.Discard, r) }

	call(500, 120, 3, all)
	if got := used(); got != 120 {
		t.Fatalf("read to its end: tokens used %d; want the actual 120", got)
	}
	if e := ev.last(t); e.Outcome != quota.OutcomeSettled || len(e.Usage) != 2 || e.Usage[0].Budget != "tokens" || e.Usage[0].Cost != 120 {
		t.Fatalf("settle event %+v; want settled, tokens costing 120", e)
	}

	// closed after its cost line, before EOF: settled at Close
	call(500, 70, 0, func(r io.Reader) { bufio.NewReader(r).ReadString('\n') })
	if got := used(); got != 190 {
		t.Fatalf("closed after its cost: tokens used %d; want 190", got)
	}

	// abandoned half way: the estimate stays, and an event says so
	call(400, 90, 50, func(r io.Reader) { io.ReadFull(r, make([]byte, 12)) })
	if got := used(); got != 590 {
		t.Fatalf("abandoned: tokens used %d; want 190 + the estimate 400", got)
	}
	if e := ev.last(t); e.Outcome != quota.OutcomeKept || e.Err == nil {
		t.Fatalf("abandoned: event %+v; want kept, with why", e)
	}

	// more than estimated: the excess counts on top
	call(100, 250, 2, all)
	if got := used(); got != 840 {
		t.Fatalf("excess: tokens used %d; want 590 + 250", got)
	}
	if e := ev.last(t); e.Outcome != quota.OutcomeExcess || e.Budget != "tokens" || e.Units != 150 || e.Err != nil {
		t.Fatalf("excess: event %+v; want an excess of 150 tokens", e)
	}
	up.mu.Lock()
	billed := up.billed
	up.mu.Unlock()
	if want := billed + 400 - 90; used() != want {
		t.Fatalf("tokens used %d; want what was billed (%d) plus the abandoned call's margin (310)", used(), billed)
	}
}

// TestTransportSettleConcurrentClose: a body closed by one goroutine while
// another reads it settles once, and the race detector sees no race.
func TestTransportSettleConcurrentClose(t *testing.T) {
	up := &lineCost{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	lim, err := quota.New(quota.NewMemoryStore(), "gen", []quota.Budget{
		{Name: "tokens", Limit: 1 << 40, Window: quota.Sliding(time.Minute)},
		{Name: "requests", Limit: 1 << 40, Window: quota.Sliding(time.Minute)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ev := &settleEvents{}
	client := &http.Client{Transport: quota.NewTransport(lim, linePricer{}, quota.WithCredential(quota.Credential{Secret: "k"}),
		quota.WithTransportObserver(ev))}
	var wg sync.WaitGroup
	for range 20 {
		resp, err := client.Get(srv.URL + "/gen?max=10&cost=5&lines=2000")
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { io.Copy(io.Discard, resp.Body) })
		wg.Go(func() { resp.Body.Close() })
	}
	wg.Wait()
	lim.Flush(t.Context())
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.es) != 20 {
		t.Fatalf("%d settle events for 20 calls; want one each (settled or kept)", len(ev.es))
	}
}
