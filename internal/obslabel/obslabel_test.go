package obslabel

import (
	"testing"

	"github.com/quotactl/quotactl/quota"
)

func TestOfBoundsAndFallsBack(t *testing.T) {
	s := &Set{MaxOwners: 2, MaxMethods: 1}
	for _, c := range []struct {
		e             quota.Event
		owner, method string
	}{
		{quota.Event{Owner: "proj-a", Label: "k1", Method: "videos.list"}, "proj-a", "videos.list"},
		{quota.Event{Label: "k2", Method: "search.list"}, "k2", Other},
		{quota.Event{Method: "videos.list"}, Other, "videos.list"}, // third owner: Unlabelled is past the bound
		{quota.Event{Owner: "proj-a", Method: "search.list"}, "proj-a", Other},
	} {
		if o, m := s.Of(c.e); o != c.owner || m != c.method {
			t.Errorf("Of(%+v) = %q, %q; want %q, %q", c.e, o, m, c.owner, c.method)
		}
	}
	if o, _ := (&Set{MaxOwners: 5, MaxMethods: 5}).Of(quota.Event{}); o != Unlabelled {
		t.Errorf("no owner, no label: %q, want %q", o, Unlabelled)
	}
}
