package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary be a fleet child, as the bench binary is
// (fleetEnv set): the fleet table runs os.Executable.
func TestMain(m *testing.M) {
	if spec := os.Getenv(fleetEnv); spec != "" {
		os.Exit(fleetChild(context.Background(), spec, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestFleet runs the fleet table, briefly, with real child processes
// against a real Redis: every cell measured in every round, decisions made
// by every kind, Redis time counted for the Redis kinds, the SQLite row
// measured, and the table written.
func TestFleet(t *testing.T) {
	rdb := realRedis(t)
	cfg := config{dur: 50 * time.Millisecond, warmup: 5 * time.Millisecond, rounds: 2, fleet: []int{1, 3}, fleetOnly: true}
	var progress bytes.Buffer
	r := &runner{cfg: cfg, rdb: rdb, prefix: "qbench:fleettest:" + t.Name() + ":", progress: &progress, ceilings: map[int]*sample{}}
	t.Cleanup(func() { _ = deleteKeys(t.Context(), rdb, r.prefix+"*", "rate:"+r.prefix+"*") })
	cells, sqlite, err := r.fleet(t.Context(), cfg.fleet, filepath.Join(t.TempDir(), "fleet.db"))
	if err != nil {
		t.Fatalf("fleet: %v\nprogress:\n%s", err, progress.String())
	}
	if len(cells) != 2*len(fleetKinds) {
		t.Fatalf("%d cells, want %d", len(cells), 2*len(fleetKinds))
	}
	for _, c := range append(cells, sqlite) {
		if len(c.perSecond) != 2 {
			t.Errorf("%s %d: %d rounds, want 2", c.kind, c.procs, len(c.perSecond))
		}
		for i, v := range c.perSecond {
			if v <= 0 {
				t.Errorf("%s %d round %d: %v decisions/s", c.kind, c.procs, i, v)
			}
			// (a leased process may make no store call in a short round)
			if (c.kind == "sqlite") != (c.usec[i] < 0) || c.kind != "sqlite" && c.kind != "leased" && c.usec[i] == 0 {
				t.Errorf("%s %d round %d: Redis %vµs per decision", c.kind, c.procs, i, c.usec[i])
			}
		}
	}
	var b bytes.Buffer
	fleetTable(&b, cells, sqlite)
	for _, want := range []string{"| 1 |", "| 3 |", "SQLite: 8 processes"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table without %q:\n%s", want, b.String())
		}
	}
}
