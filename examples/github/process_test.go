package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/quotactl/quotactl/internal/ghsim"
	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota/storeurl"
)

func TestMain(m *testing.M) {
	testkit.RunChild(map[string]func(string) int{"main": testkit.MainRole(main)})
	redistest.Main(m)
}

var jobLine = regexp.MustCompile(`job: (\d+) calls; .*\n.*403/429 received: (\d+)`)

// TestDriftAcrossProcesses: three job processes share one store (an SQLite
// file, then a real Redis) and one GitHub user's 200 core calls an hour;
// after the jobs' 30th call, a CI token of the same user, not metered,
// spends 40% of the quota (80 calls) while they run. Every process learns
// it from the responses: together they make the 120 calls left, no process
// draws a 403 or 429, and the store ends counting GitHub's 200.
func TestDriftAcrossProcesses(t *testing.T) {
	_, addr := redistest.Shared(t)
	for name, u := range map[string]string{
		"sqlite": storeurl.SQLiteURL(filepath.Join(t.TempDir(), "quota.db")),
		"redis":  "redis://" + addr + "/0?prefix=" + url.QueryEscape(redistest.Prefix(t)),
	} {
		t.Run(name, func(t *testing.T) {
			sim := ghsim.NewHandler(ghsim.WithUser("octocat", 583231, "ghp_job", "ghp_ci"), ghsim.WithLimit(ghsim.Core, 200))
			var jobCalls atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") == "Bearer ghp_job" && jobCalls.Add(1) == 30 {
					if !sim.Spend("ghp_ci", ghsim.Core, 80) {
						t.Error("CI could not spend 80")
					}
				}
				sim.ServeHTTP(w, r)
			}))
			defer srv.Close()
			var cmds []*exec.Cmd
			var outs []*bytes.Buffer
			for range 3 {
				flags, _ := json.Marshal([]string{"--store", u, "--upstream", srv.URL})
				cmd := testkit.Child(t, "main", string(flags))
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				cmds, outs = append(cmds, cmd), append(outs, &out)
			}
			for _, cmd := range cmds {
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
			}
			total, refused := 0, 0
			for i, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("process %d: %v\n%s", i, err, outs[i])
				}
				m := jobLine.FindStringSubmatch(outs[i].String())
				if m == nil {
					t.Fatalf("process %d: no summary:\n%s", i, outs[i])
				}
				n, _ := strconv.Atoi(m[1])
				e, _ := strconv.Atoi(m[2])
				total, refused = total+n, refused+e
			}
			if used := sim.Used("ghp_job", ghsim.Core); used != 200 || sim.PrimaryErrors() != 0 || refused != 0 || total != 120 {
				t.Fatalf("jobs made %d calls, drew %d 403/429 (GitHub sent %d); GitHub counts %d used; want 120, 0, 0, 200",
					total, refused, sim.PrimaryErrors(), used)
			}
		})
	}
}
