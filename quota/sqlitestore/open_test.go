package sqlitestore_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// rawDB opens the file directly, outside the store, to look at what it
// holds.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestOpenCreatesVersionedWALDatabase(t *testing.T) {
	st, path := openTemp(t)
	if st.Path() != path {
		t.Fatalf("Path() = %q, want %q", st.Path(), path)
	}
	db := rawDB(t, path)
	var version int
	var mode string
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil || version != 4 {
		t.Fatalf("user_version = %d, %v; want 4", version, err)
	}
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	// Opening it again (another process would) keeps the data.
	ctx := context.Background()
	if err := st.SaveState(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	st2, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	if v, err := st2.LoadState(ctx, "k"); err != nil || string(v) != "v" {
		t.Fatalf("LoadState through a second store = %q, %v", v, err)
	}
}

// assertUntouched opens path expecting an error that mentions path and want,
// and checks the file is byte-identical afterwards, with no journal files
// next to it.
func assertUntouched(t *testing.T, path, want string, is ...error) {
	t.Helper()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlitestore.Open(path)
	if err == nil {
		st.Close()
		t.Fatalf("Open(%s) succeeded, want an error", path)
	}
	if !strings.Contains(err.Error(), "sqlitestore: open "+path+": ") || !strings.Contains(err.Error(), want) {
		t.Errorf("Open error = %q, want it to name the path and say %q", err, want)
	}
	for _, target := range is {
		if !errors.Is(err, target) {
			t.Errorf("Open error = %v, want errors.Is %v", err, target)
		}
	}
	if errors.Is(err, quota.ErrStoreUnavailable) {
		t.Errorf("Open error = %v wraps ErrStoreUnavailable; retrying cannot help", err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("Open modified %s (%d bytes before, %d after)", path, len(before), len(after))
	}
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if _, err := os.Stat(path + suffix); err == nil {
			t.Errorf("Open left %s%s behind", path, suffix)
		}
	}
}

func TestOpenRefusesNonSQLiteFile(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string][]byte{
		"text":    []byte("region,etag\nUS,abc\n"),
		"short":   []byte("SQLite"),
		"binary":  bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 2048),
		"lookalk": append([]byte("SQLite format 2\x00"), make([]byte, 4096)...),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".db")
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			assertUntouched(t, path, "file is not an SQLite database", sqlitestore.ErrNotDatabase, quota.ErrInvalid)
		})
	}
}

// TestOpenRefusesCorruptHeader: the magic is right but the rest is not a
// database: SQLite itself says so, and nothing is written.
func TestOpenRefusesCorruptHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corrupt.db")
	content := append([]byte("SQLite format 3\x00"), bytes.Repeat([]byte{0xff}, 4096-16)...)
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	assertUntouched(t, path, "file is not an SQLite database", sqlitestore.ErrNotDatabase)
}

func makeDB(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "newer.db")
	makeDB(t, path, `CREATE TABLE future (x)`, `PRAGMA user_version = 99`)
	assertUntouched(t, path, "schema version 99 is newer", quota.ErrInvalid)
}

func TestOpenRefusesAnotherProgramsDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	makeDB(t, path, `CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)`, `INSERT INTO photos (name) VALUES ('cat.jpg')`)
	assertUntouched(t, path, `table "photos"`, quota.ErrInvalid)
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := sqlitestore.Open(""); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("Open(\"\") = %v, want ErrInvalid", err)
	}
	if _, err := sqlitestore.Open(dir); !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), dir) {
		t.Errorf("Open(directory) = %v, want ErrInvalid naming it", err)
	}
	missing := filepath.Join(dir, "no", "such", "dir", "q.db")
	if _, err := sqlitestore.Open(missing); !errors.Is(err, quota.ErrStoreUnavailable) || !strings.Contains(err.Error(), missing) ||
		!strings.Contains(err.Error(), "directory "+filepath.Dir(missing)+" does not exist") {
		t.Errorf("Open(in a missing directory) = %v, want ErrStoreUnavailable naming the path and saying its directory does not exist", err)
	}
	// An empty file is an empty database: it is initialised.
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := sqlitestore.Open(empty)
	if err != nil {
		t.Fatalf("Open(empty file) = %v", err)
	}
	st.Close()
	// A path with URI syntax in it is a plain file name.
	odd := filepath.Join(dir, "a?mode=ro#x%20.db")
	st, err = sqlitestore.Open(odd)
	if err != nil {
		t.Fatalf("Open(%q) = %v", odd, err)
	}
	if err := st.SaveState(context.Background(), "k", []byte("v")); err != nil {
		t.Fatalf("SaveState on %q: %v", odd, err)
	}
	st.Close()
	if _, err := os.Stat(odd); err != nil {
		t.Fatalf("the file %q was not created where asked: %v", odd, err)
	}
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	st, _ := openTemp(t)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	ctx := context.Background()
	b := quota.Budget{Name: "u", Limit: 10, Window: quota.Sliding(time.Hour)}
	_, err := st.Take(ctx, &backend.TakeRequest{API: "a", Owner: "c", Nonce: "n", Debits: []backend.Debit{{Budget: b, Cost: 1}}})
	if !errors.Is(err, quota.ErrStoreUnavailable) || !strings.HasPrefix(err.Error(), "sqlitestore: take: ") {
		t.Errorf("Take after Close = %v, want sqlitestore: take: ...ErrStoreUnavailable", err)
	}
	if _, err := st.List(ctx); !errors.Is(err, quota.ErrStoreUnavailable) {
		t.Errorf("List after Close = %v, want ErrStoreUnavailable", err)
	}
}

// TestConcurrentOpen: stores opening one new file at the same moment (as
// processes started together do) all succeed: one creates the schema, the
// others wait for it and see it whole.
func TestConcurrentOpen(t *testing.T) {
	dir := t.TempDir()
	for i := range 20 {
		path := filepath.Join(dir, fmt.Sprintf("fresh-%d.db", i))
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := sqlitestore.Open(path)
				if err != nil {
					t.Errorf("round %d, opener %d: %v", i, g, err)
					return
				}
				defer st.Close()
				if err := st.SaveState(context.Background(), fmt.Sprint("k", g), []byte("v")); err != nil {
					t.Errorf("round %d, opener %d: SaveState: %v", i, g, err)
				}
			}()
		}
		wg.Wait()
	}
}
