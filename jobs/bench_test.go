package jobs_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

type fullStore interface {
	quota.Store
	quota.StateStore
}

// BenchmarkRunOnce measures what the scheduler adds to one run: the
// observer and allocation contexts, one checkpoint save and the history
// record, with a job that makes one Take.
func BenchmarkRunOnce(b *testing.B) {
	for _, tc := range []struct {
		name  string
		store func(b *testing.B) fullStore
	}{
		{"memory", func(*testing.B) fullStore { return quota.NewMemoryStore() }},
		{"sqlite", func(b *testing.B) fullStore {
			s, err := sqlitestore.Open(filepath.Join(b.TempDir(), "quota.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			store := tc.store(b)
			l, err := quota.New(store, "youtube", []quota.Budget{{Name: "units", Limit: 1 << 40, Window: quota.Sliding(time.Hour)}})
			if err != nil {
				b.Fatal(err)
			}
			s := jobs.New(store, jobs.WithLogger(slog.New(slog.DiscardHandler)))
			err = s.Add("ingest", "", func(ctx context.Context, run *jobs.Run) error {
				if _, err := l.Take(ctx, key, quota.Units("units", 1)); err != nil {
					return err
				}
				return run.Save(ctx, 1)
			})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.RunOnce(ctx, "ingest"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTakeInRun measures the cost of counting a run's units: a Take
// under a run's context against a bare Take, on MemoryStore.
func BenchmarkTakeInRun(b *testing.B) {
	store := quota.NewMemoryStore()
	l, err := quota.New(store, "youtube", []quota.Budget{{Name: "units", Limit: 1 << 40, Window: quota.Sliding(time.Hour)}})
	if err != nil {
		b.Fatal(err)
	}
	ch := quota.Units("units", 1)
	b.Run("bare", func(b *testing.B) {
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := l.Take(ctx, key, ch); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("in-run", func(b *testing.B) {
		s := jobs.New(store, jobs.WithLogger(slog.New(slog.DiscardHandler)))
		err := s.Add("ingest", "", func(ctx context.Context, _ *jobs.Run) error {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.Take(ctx, key, ch); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.RunOnce(context.Background(), "ingest"); err != nil {
			b.Fatal(err)
		}
	})
}
