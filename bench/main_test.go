package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseFlagsDefaults(t *testing.T) {
	cfg, err := parseFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.goroutines, []int{1, 64}) || !slices.Equal(cfg.fills, []int{10, 100000}) {
		t.Errorf("goroutines %v, fills %v: want [1 64] and [10 100000]", cfg.goroutines, cfg.fills)
	}
	if !slices.Equal(cfg.fleet, []int{1, 8, 32}) || cfg.fleetOnly {
		t.Errorf("fleet %v, fleet-only %v: want [1 8 32] and false", cfg.fleet, cfg.fleetOnly)
	}
	if cfg.dur != time.Second || cfg.rounds != 3 || cfg.window != time.Second || cfg.count != 6000 || cfg.only != nil {
		t.Errorf("defaults %+v", cfg)
	}
}

func TestRunBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-goroutines", "1,x"}, {"-goroutines", "0"}, {"-fill", "-1"}, {"-d", "0s"}, {"-rounds", "0"},
		{"-window", "10us"}, {"-count", "0"}, {"-run", "("}, {"extra"}, {"-nosuchflag"},
		{"-fleet", "0"}, {"-fleet", "1,x"}, {"-fleet", "none", "-fleet-only"},
	} {
		var out, errs bytes.Buffer
		if code := run(t.Context(), args, &out, &errs); code != 2 {
			t.Errorf("run %q: exit %d, want 2 (stderr %q)", args, code, errs.String())
		}
		if out.Len() != 0 || !strings.Contains(errs.String(), "bench: ") && !strings.Contains(errs.String(), "flag") {
			t.Errorf("run %q: stdout %q, stderr %q: want nothing on stdout and the reason on stderr", args, out.String(), errs.String())
		}
	}
	var out, errs bytes.Buffer
	if code := run(t.Context(), []string{"-h"}, &out, &errs); code != 0 || !strings.Contains(errs.String(), "-rounds") {
		t.Errorf("-h: exit %d, stderr %q: want 0 and the flags", code, errs.String())
	}
}
