package cli

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/quotactl/quotactl/internal/redistest"
)

// TestOnRedis runs quotactl on the shared test Redis, under a key prefix of
// its own: the CLI works the same on every store.
func TestOnRedis(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if u := os.Getenv(redistest.EnvURL); u != "" {
		e.url = u
	} else {
		_, addr := redistest.Shared(t)
		e.url = "redis://" + addr
	}
	prefix := redistest.Prefix(t)
	sep := "?"
	if strings.Contains(e.url, "?") {
		sep = "&"
	}
	e.url += sep + "prefix=" + prefix
	e.setup()
	var takes int
	for ; takes < 20; takes++ {
		if r := e.run("take", "youtube", "--label", "yt-key-1", "--cost", "3", "--budget", "units"); r.code != 0 {
			if r.code != ExitExhausted {
				t.Fatalf("take: exit %d, %s", r.code, r.errOut)
			}
			break
		}
	}
	if takes != 3 {
		t.Errorf("%d takes of 3 fitted after 1 of 10, want 3", takes)
	}
	if u := e.usage("youtube")["yt-key-1/units"]; u.Used != 10 || u.Remaining != 0 {
		t.Errorf("status on Redis: %+v", u)
	}
	// Everything went under the prefix.
	c := redistest.Client(t)
	keys, err := c.Keys(context.Background(), prefix+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Errorf("keys under %q: %v, %v", prefix, keys, err)
	}
}
