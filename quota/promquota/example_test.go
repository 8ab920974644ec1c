package promquota_test

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/promquota"
)

// A Collector is the Limiter's Observer and a registered Prometheus
// collector; serve the registry with promhttp.
func ExampleNew() {
	ctx := context.Background()
	c := promquota.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	lim, err := quota.New(quota.NewMemoryStore(), "youtube",
		[]quota.Budget{{Name: "units", Limit: 100, Window: quota.Daily(time.UTC)}}, quota.WithObserver(c))
	if err != nil {
		panic(err)
	}
	key := quota.Credential{Secret: "AIzaSy-example", Label: "yt-key-1"}
	for range 3 {
		_, _ = lim.Take(ctx, key, quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 40}})
	}
	_ = lim.Flush(ctx)
	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		if f.GetName() != "quota_units_total" && f.GetName() != "quota_remaining_units" {
			continue
		}
		for _, m := range f.GetMetric() {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			fmt.Print(f.GetName(), "{")
			for i, l := range m.GetLabel() {
				if i > 0 {
					fmt.Print(",")
				}
				fmt.Printf("%s=%q", l.GetName(), l.GetValue())
			}
			fmt.Println("}", v)
		}
	}
	// Output:
	// quota_remaining_units{api="youtube",budget="units",owner="yt-key-1"} 20
	// quota_units_total{api="youtube",budget="units",method="videos.list",outcome="admitted",owner="yt-key-1"} 80
	// quota_units_total{api="youtube",budget="units",method="videos.list",outcome="refused",owner="yt-key-1"} 40
}
