package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/storeurl"
)

func TestMain(m *testing.M) {
	testkit.RunChild(map[string]func(string) int{"main": testkit.MainRole(main)})
	redistest.Main(m)
}

// TestThreeProcessesTogether: three `youtube --once` processes started
// together on one store (SQLite, then Redis), each with its own simulator:
// exactly one runs, the output has no duplicate video, and the budget is
// spent once. The others are skipped (the job's lease is held) or do not
// start (the budget the run spent is waited for).
func TestThreeProcessesTogether(t *testing.T) {
	t.Parallel()
	_, addr := redistest.Shared(t)
	for name, u := range map[string]string{
		"sqlite": storeurl.SQLiteURL(filepath.Join(t.TempDir(), "quota.db")),
		"redis":  "redis://" + addr + "/0?prefix=" + url.QueryEscape(redistest.Prefix(t)),
	} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "trending.jsonl")
			var cmds []*exec.Cmd
			var stdouts []*bytes.Buffer
			for range 3 {
				flags, _ := json.Marshal([]string{"--once", "--store", u, "--out", out})
				cmd := testkit.Child(t, "main", string(flags))
				var stdout bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stdout
				cmds, stdouts = append(cmds, cmd), append(stdouts, &stdout)
			}
			for _, cmd := range cmds {
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
			}
			var all string
			for i, cmd := range cmds {
				err := cmd.Wait()
				all += fmt.Sprintf("--- process %d:\n%s", i, stdouts[i])
				if err != nil {
					t.Errorf("process %d: %v", i, err)
				}
			}

			ctx := context.Background()
			store, err := storeurl.Open(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			h, err := jobs.History(ctx, store.(quota.StateStore), "trending", 0)
			if err != nil {
				t.Fatal(err)
			}
			ran, skipped := 0, 0
			var spent int64
			for _, r := range h {
				switch r.Outcome {
				case jobs.OK, jobs.Exhausted:
					ran++
					spent += r.Spent[simAPI+"/units"]
				case jobs.Skipped:
					skipped++
				default:
					t.Errorf("run %s: %s %q", r.Run, r.Outcome, r.Error)
				}
			}
			notStarted := strings.Count(all, "not started: ")
			if ran != 1 || skipped+notStarted != 2 || strings.Count(all, "skipped: another run holds the job (") != skipped {
				t.Errorf("%d runs ran, %d skipped, %d not started; want exactly 1 run, the other 2 skipped or not started:\n%s", ran, skipped, notStarted, all)
			}
			// The budget was spent once: 30 units (40 less the headroom of 10).
			l, err := quota.Load(ctx, store, simAPI)
			if err != nil {
				t.Fatal(err)
			}
			us, err := l.Status(ctx, quota.Credential{Secret: simKey})
			if err != nil {
				t.Fatal(err)
			}
			used := int64(-1)
			for _, u := range us {
				if u.Budget == "units" {
					used = u.Used
				}
			}
			if used != 30 || spent != 30 {
				t.Errorf("units used %d, spent by runs %d; want 30 both", used, spent)
			}
			// No video twice: 7 regions of 250 items and 2 pages of CA.
			seen := map[string]int{}
			items := lines(t, out)
			for _, it := range items {
				seen[fmt.Sprint(it.Region, it.Source, it.Rank)]++
			}
			if len(items) != 7*250+100 || len(seen) != len(items) {
				t.Errorf("%d output lines, %d distinct; want %d, all distinct", len(items), len(seen), 7*250+100)
			}
		})
	}
}
