package quota_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/ytsim"
	"github.com/quotactl/quotactl/quota"
)

// A metered http.Client for the YouTube Data API: every request is priced
// with the built-in cost table and charged to its API key before it is sent;
// a request the budget cannot pay is refused without being sent.
func ExampleNewTransport() {
	upstream := ytsim.New() // a simulated YouTube Data API on loopback
	defer upstream.Close()

	table, err := costs.Builtin("youtube")
	if err != nil {
		panic(err)
	}
	// The table prices requests to Google's hosts (www.googleapis.com,
	// youtube.googleapis.com); a request to any other host is not the
	// API's. Here the API is the simulator's host.
	table, err = table.WithHosts(upstream.Host())
	if err != nil {
		panic(err)
	}
	lim, err := quota.New(quota.NewMemoryStore(), table.API, table.Budgets)
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: quota.NewTransport(lim, table, quota.WithLabel("yt-key-1"))}
	// An existing client keeps its settings: client.Transport =
	// quota.NewTransport(lim, table, quota.WithBase(client.Transport)).

	get := func(path string) error {
		req, _ := http.NewRequest("GET", upstream.URL()+path, nil)
		req.Header.Set("X-Goog-Api-Key", "AIza-example-key")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var body struct{ Items []json.RawMessage }
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return err
		}
		fmt.Printf("%s: %d items\n", resp.Status, len(body.Items))
		return nil
	}
	if err := get("/youtube/v3/videos?part=snippet&chart=mostPopular&regionCode=US&maxResults=10"); err != nil {
		panic(err)
	}
	if err := get("/youtube/v3/search?part=snippet&q=cats&maxResults=5"); err != nil {
		panic(err)
	}

	ctx := context.Background()
	key := quota.Credential{Label: "yt-key-1"}
	status, _ := lim.Status(ctx, key)
	for _, u := range status {
		fmt.Printf("%s: used %d of %d\n", u.Budget, u.Used, u.Limit)
	}

	// Spend the rest of the search bucket: the next search is not sent.
	_ = lim.Adjust(ctx, key, "search", 100)
	err = get("/youtube/v3/search?part=snippet&q=dogs")
	var ex *quota.ExhaustedError
	if errors.As(err, &ex) {
		fmt.Printf("refused: %s/%s, used %d of %d; upstream saw %d requests\n", ex.API, ex.Budget, ex.Used, ex.Limit, upstream.Requests())
	}
	// Output:
	// 200 OK: 10 items
	// 200 OK: 5 items
	// units: used 1 of 10000
	// search: used 1 of 100
	// uploads: used 0 of 100
	// stats: used 0 of 10000
	// refused: youtube/search, used 100 of 100; upstream saw 2 requests
}

// A Pricer for an API without a cost table: every request costs one unit of
// a sliding hourly budget.
func ExamplePricerFunc() {
	perCall := quota.PricerFunc(func(req *http.Request) (quota.Charge, error) {
		ch := quota.Units("calls", 1)
		ch.Method = req.Method + " " + req.URL.Path
		return ch, nil
	})
	req, _ := http.NewRequest("GET", "https://api.example.com/v1/items", nil)
	ch, _ := perCall.Price(req)
	fmt.Println(ch.Method, ch.Units)
	// Output: GET /v1/items map[calls:1]
}

// Google bills YouTube quota per Cloud project: every key of one project
// shares its budgets. WithOwnerFunc tells the transport which project a
// request's key belongs to, so two keys spend one budget.
func ExampleWithOwnerFunc() {
	upstream := ytsim.New(ytsim.WithProject("my-project", "AIza-key-1", "AIza-key-2"))
	defer upstream.Close()

	table, err := costs.Builtin("youtube") // owner: project
	if err != nil {
		panic(err)
	}
	table, err = table.WithHosts(upstream.Host()) // the simulator plays www.googleapis.com
	if err != nil {
		panic(err)
	}
	lim, err := quota.New(quota.NewMemoryStore(), table.API, table.Budgets)
	if err != nil {
		panic(err)
	}
	projectOf := map[string]string{"AIza-key-1": "my-project", "AIza-key-2": "my-project"}
	client := &http.Client{Transport: quota.NewTransport(lim, table,
		quota.WithOwnerFunc(func(r *http.Request) string { return projectOf[r.Header.Get("X-Goog-Api-Key")] }))}

	for _, key := range []string{"AIza-key-1", "AIza-key-2"} {
		req, _ := http.NewRequest("GET", upstream.URL()+"/youtube/v3/videos?part=id&id=abc", nil)
		req.Header.Set("X-Goog-Api-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
	}
	status, _ := lim.Status(context.Background(), quota.Credential{Secret: "AIza-key-1", Owner: "my-project"})
	fmt.Printf("my-project: %s used %d of %d; upstream: %d\n", status[0].Budget, status[0].Used, status[0].Limit, upstream.Used("AIza-key-2", "units"))
	// Output: my-project: units used 2 of 10000; upstream: 2
}
