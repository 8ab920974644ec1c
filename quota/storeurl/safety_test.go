package storeurl

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// TestParseSafetyOptions: allow_eviction, replicas, replica_timeout,
// pipelining and open_timeout parse into the Spec, survive String, and bad values name the option.
func TestParseSafetyOptions(t *testing.T) {
	t.Parallel()
	u := "redis+sentinel://s1:26379/main?allow_eviction=true&replicas=2&replica_timeout=250ms&pipelining=4&open_timeout=2s"
	s, err := Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	if !s.AllowEviction || s.Replicas != 2 || s.ReplicaTimeout != 250*time.Millisecond || s.OpenTimeout != 2*time.Second || s.Pipelining != 4 {
		t.Fatalf("Parse(%s) = %+v", u, s)
	}
	again, err := Parse(s.String())
	if err != nil || !again.AllowEviction || again.Replicas != 2 || again.ReplicaTimeout != 250*time.Millisecond || again.OpenTimeout != 2*time.Second || again.Pipelining != 4 {
		t.Fatalf("Parse(String()) = %+v, %v from %s", again, err, s.String())
	}
	// ?pipelining=0 turns pipelining off (Pipelining -1), and says so again
	off, err := Parse("redis://h:1?pipelining=0")
	if err != nil || off.Pipelining != -1 {
		t.Fatalf("Parse(?pipelining=0) = %+v, %v", off, err)
	}
	if again, err := Parse(off.String()); err != nil || again.Pipelining != -1 {
		t.Fatalf("Parse(%s) = %+v, %v", off.String(), again, err)
	}
	for _, tt := range []struct{ url, want string }{
		{"redis://h:1?allow_eviction=maybe", `allow_eviction="maybe"`},
		{"redis://h:1?replicas=-1", `replicas="-1"`},
		{"redis://h:1?replicas=two", `replicas="two"`},
		{"redis://h:1?replica_timeout=0s", `replica_timeout="0s"`},
		{"redis://h:1?replica_timeout=soon", `replica_timeout="soon"`},
		{"redis://h:1?pipelining=-1", `pipelining="-1"`},
		{"redis://h:1?pipelining=many", `pipelining="many"`},
		{"redis://h:1?open_timeout=0s", `open_timeout="0s"`},
		{"redis://h:1?open_timeout=-1s", `open_timeout="-1s"`},
		{"redis://h:1?open_timeout=soon", `open_timeout="soon"`},
	} {
		_, err := Parse(tt.url)
		if !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%s) = %v; want ErrInvalid naming %s", tt.url, err, tt.want)
		}
	}
}
