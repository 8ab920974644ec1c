package shopifysim_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/shopifysim"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func query(t *testing.T, h http.Handler, token, q string) (*httptest.ResponseRecorder, costs.Usage) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"query": q, "variables": map[string]any{"n": 20}})
	req := httptest.NewRequest("POST", "/admin/api/2025-10/graphql.json", strings.NewReader(string(b)))
	req.Header.Set("X-Shopify-Access-Token", token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	u, _ := costs.ReadUsage(costs.ShopifyGraphQL, rec.Body.Bytes())
	return rec, u
}

func TestQueryCosts(t *testing.T) {
	s := shopifysim.NewHandler(shopifysim.WithItems(5))
	for _, c := range []struct {
		q                 string
		requested, actual int64
	}{
		{`{ shop { name } }`, 1, 1},
		{`{ products(first: 10) { edges { node { id title } } } }`, 12, 7},
		{`query Q($n: Int) { products(first: $n) { nodes { id variants(first: 5) { edges { node { id } } } } } }`, 2 + 20*(1+7), 2 + 5*(1+7)},
		{`mutation { productUpdate(input: {id: "x", title: "y"}) { product { id } userErrors { field } } }`, 13, 13},
		{`{ a: products(first: 3) { edges { cursor node { id } } pageInfo { hasNextPage } } }`, 5, 5},
	} {
		rec, u := query(t, s, "tok", c.q)
		if rec.Code != 200 || u.RequestedQueryCost != c.requested || u.QueryCost != c.actual || u.Throttle == nil {
			t.Errorf("%s: %d %s: usage %+v, want requested %d actual %d", c.q, rec.Code, rec.Body, u, c.requested, c.actual)
		}
	}
	rec, _ := query(t, s, "tok", `{ a: products(first: 3) { edges { node { id } } } }`)
	var got struct {
		Data struct {
			A struct {
				Edges []struct{ Node struct{ ID string } }
			}
		}
	}
	if json.Unmarshal(rec.Body.Bytes(), &got) != nil || len(got.Data.A.Edges) != 3 || got.Data.A.Edges[2].Node.ID != "gid://shopify/Product/3" {
		t.Errorf("data %s", rec.Body)
	}
}

func TestThrottledWith200(t *testing.T) {
	c := &clock{now: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
	s := shopifysim.NewHandler(shopifysim.WithClock(c.Now), shopifysim.WithBucket(2000, 100), shopifysim.WithItems(250), shopifysim.WithShop("shop", "t1", "t2"))
	q := `{ products(first: 249) { nodes { id } } }` // 2 + 249*1 = 251... with nodes: 2+249*(1+0) = 251
	for i := range 7 {
		if _, u := query(t, s, "t1", q); u.Throttled || u.QueryCost != 251 {
			t.Fatalf("query %d: %+v", i, u)
		}
	}
	// 7*251 = 1757 taken; 243 left: the next is THROTTLED, with HTTP 200.
	rec, u := query(t, s, "t2", q)
	if rec.Code != 200 || !u.Throttled || u.QueryCost != 0 || u.RequestedQueryCost != 251 || u.Throttle.CurrentlyAvailable != 243 {
		t.Fatalf("%d %s %+v", rec.Code, rec.Body, u)
	}
	if !strings.Contains(rec.Body.String(), `"actualQueryCost":null`) || !strings.Contains(rec.Body.String(), `"message":"Throttled"`) {
		t.Fatalf("throttled body %s", rec.Body)
	}
	if s.Throttled() != 1 || s.Charged("shop") != 7*251 {
		t.Fatalf("throttled %d charged %d", s.Throttled(), s.Charged("shop"))
	}
	c.Add(80 * time.Millisecond) // 100/s: 8 points
	if _, u := query(t, s, "t2", q); u.Throttled {
		t.Fatalf("after 80ms: %+v", u)
	}
	if got := s.Available("shop"); got != 0 {
		t.Fatalf("available %d, want 0", got)
	}
}

func TestMaxCostExceeded(t *testing.T) {
	s := shopifysim.NewHandler()
	rec, u := query(t, s, "t", `{ orders(first: 250) { nodes { lineItems(first: 10) { nodes { id } } } } }`)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "MAX_COST_EXCEEDED") || u.QueryCost != 0 || s.MaxCostExceeded() != 1 || s.Charged("t") != 0 {
		t.Fatalf("%d %s %+v", rec.Code, rec.Body, u)
	}
}

func TestBadQueries(t *testing.T) {
	s := shopifysim.NewHandler()
	for _, q := range []string{"", "{", "{ a(first: 1000) { nodes { id } } }", "fragment F on Product { id }", "{ ...F }", "{ a } { b }", strings.Repeat("{ a ", 40) + strings.Repeat("}", 40)} {
		rec, u := query(t, s, "t", q)
		if u.QueryCost != 0 || (rec.Code == 200 && !strings.Contains(rec.Body.String(), `"errors"`)) {
			t.Errorf("%q: %d %s", q, rec.Code, rec.Body)
		}
	}
}
