package costs_test

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/quotactl/quotactl/costs"
)

// Plan a run against the built-in YouTube profile: what each method costs,
// and what a day of calls takes from each budget.
func ExampleBuiltin() {
	table, err := costs.Builtin("youtube")
	if err != nil {
		panic(err)
	}
	for _, b := range table.Budgets {
		fmt.Printf("budget %s: %d per %s\n", b.Name, b.Limit, b.Window)
	}
	for _, name := range []string{"videos.list", "search.list", "videos.insert", "captions.update"} {
		ch, _ := table.Charge(name)
		fmt.Println(name, ch.Units)
	}
	// 8 regions x 4 pages of trending videos, plus one search per region.
	need, err := table.Estimate(map[string]int64{"videos.list": 32, "search.list": 8})
	if err != nil {
		panic(err)
	}
	fmt.Println("estimate:", need)

	legacy, _ := costs.Builtin("youtube-legacy")
	need, _ = legacy.Estimate(map[string]int64{"videos.list": 32, "search.list": 8})
	fmt.Println("legacy estimate:", need)
	// Output:
	// budget units: 10000 per daily:America/Los_Angeles
	// budget search: 100 per daily:America/Los_Angeles
	// budget uploads: 100 per daily:America/Los_Angeles
	// budget stats: 10000 per daily:America/Los_Angeles
	// videos.list map[units:1]
	// search.list map[search:1]
	// videos.insert map[uploads:1]
	// captions.update map[units:450]
	// estimate: map[search:8 units:32]
	// legacy estimate: map[units:832]
}

// A table for another API, from YAML; Price maps requests to charges, and
// prices only requests to the hosts the table names.
func ExampleParse() {
	const file = `
api: maps
hosts: [maps.example.com]
budgets:
  - {name: requests, limit: 100000, window: "daily:UTC"}
methods:
  geocode:    {routes: [GET /v1/geocode], cost: {requests: 1}}
  directions: {routes: ["GET /v1/directions/{mode}"], cost: {requests: 5}}
`
	table, err := costs.Parse("maps.yaml", []byte(file))
	if err != nil {
		panic(err)
	}
	for _, target := range []string{
		"https://maps.example.com/v1/geocode?address=Paris",
		"https://maps.example.com/v1/directions/walking",
		"https://maps.example.com/v1/elevation",
		"https://tiles.example.com/v1/geocode", // another host: not a call of the API
	} {
		req, _ := http.NewRequest("GET", target, nil)
		ch, err := table.Price(req)
		if err != nil {
			fmt.Println("error:", strings.SplitN(err.Error(), ";", 2)[0])
			continue
		}
		fmt.Println(ch.Method, ch.Units)
	}

	// A mistake names the line and the field.
	_, err = costs.Parse("maps.yaml", []byte(strings.Replace(file, "{requests: 5}", "{request: 5}", 1)))
	fmt.Println(err)
	// Output:
	// geocode map[requests:1]
	// directions map[requests:5]
	// error: costs: unknown method: table maps has no route for GET /v1/elevation and no default cost
	// error: quota: host not priced: table maps prices requests to maps.example.com, not to tiles.example.com
	// costs: maps.yaml:8: methods[directions].cost.request: unknown budget "request" (budgets: requests)
}
