package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/quotactl/quotactl/cmd/quotactl/internal/cli"
)

// ExampleMain runs quotactl in process, as the binary does, with a fixed
// clock and a key in a fake environment: define a budget, take until it is
// spent (exit 3), and show the status.
func ExampleMain() {
	dir, _ := os.MkdirTemp("", "quotactl-example")
	defer os.RemoveAll(dir)
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	env := map[string]string{"QUOTA_STORE": "sqlite:" + filepath.Join(dir, "quota.db"), "YT_KEY": "AIza..."}

	run := func(args ...string) string {
		var out, errOut strings.Builder
		code := cli.Main(context.Background(), strings.Fields(strings.Join(args, " ")), &cli.IO{
			Out: &out, ErrOut: &errOut, In: strings.NewReader(""),
			LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
			Clock:     func() time.Time { return now },
			Location:  time.UTC,
		})
		fmt.Print(errOut.String())
		if code != 0 {
			fmt.Println("exit", code)
		}
		return out.String()
	}
	fmt.Print(run("budget set youtube/units --limit 10 --window 1h"))
	id := run("take youtube --credential-env YT_KEY --label yt-key-1 --cost 6 --budget units")
	// The ID is API/ACCOUNT/TIME.NONCE (the account: the owner, here the
	// credential's own fingerprint); the nonce is random.
	fmt.Println("reservation", id[:strings.LastIndex(id, "/")])
	now = now.Add(10 * time.Minute)
	fmt.Print(run("take youtube --label yt-key-1 --cost 6"))
	fmt.Print(run("status"))
	// Output:
	// youtube/units: 10 units per sliding 1h
	// reservation youtube/8f1e99ea8146602ea9f5e4a7
	// quotactl: youtube/units is spent for yt-key-1 (used 6 of 10, this charge needs 6): frees up in 50m, at 2026-11-22 10:00:00 UTC
	// exit 3
	// youtube	8f1e99ea	yt-key-1	units	6/10	4	[############--------]  60%	in 50m (2026-11-22 10:00:00 UTC)	-
}
