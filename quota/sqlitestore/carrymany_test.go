package sqlitestore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// TestFileDeletedUnderEightStoresAllCarry: eight stores on one file that
// is deleted all find it at once and carry its usage to the one new file
// they create together: the new file has the budget spent.
func TestFileDeletedUnderEightStoresAllCarry(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for iter := range 5 {
		path := filepath.Join(t.TempDir(), "quota.db")
		var ls []*quota.Limiter
		for range 8 {
			st, err := sqlitestore.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			sqlitestore.SetClock(st, func() time.Time { return at.Add(time.Minute) })
			ls = append(ls, mpLimiter(t, st, 100, at))
		}
		mustTake(t, ls[0], 60)
		for _, f := range []string{path, path + "-wal", path + "-shm"} {
			os.Remove(f)
		}
		var wg sync.WaitGroup
		errs := make([]error, len(ls))
		for i, l := range ls {
			wg.Go(func() { _, errs[i] = l.Take(ctx, childKey, quota.Units(childBudget, 1)) })
		}
		wg.Wait()
		for i, err := range errs {
			if !errors.Is(err, sqlitestore.ErrReplaced) || strings.Contains(err.Error(), "failed") {
				t.Logf("iter %d store %d: %v", iter, i, err)
			}
		}
		st2, err := sqlitestore.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		us, err := mpLimiter(t, st2, 100, at).Status(ctx, childKey)
		st2.Close()
		if err != nil || us[0].ExhaustedUntil.Before(at.Add(24*time.Hour)) {
			t.Fatalf("iter %d: new file: %+v, %v", iter, us, err)
		}
	}
}
