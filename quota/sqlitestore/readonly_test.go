//go:build unix

package sqlitestore_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// TestReadOnlyOpenWritesNothing opens a store read-only: reads work,
// writes fail with ErrReadOnly, and the file is left byte for byte as it
// was, with no WAL or shared-memory file made beside it.
func TestReadOnlyOpenWritesNothing(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "quota.db")
	st, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	mustTake(t, mpLimiter(t, st, 100, at), 42)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	before := fileSum(t, path)

	ro, err := sqlitestore.Open(path, sqlitestore.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	l := mpLimiter(t, ro, 100, at)
	us, err := l.Status(ctx, childKey)
	if err != nil || us[0].Used != 42 {
		t.Fatalf("read-only Status: %v, %v; want used 42", us, err)
	}
	if apis, err := ro.List(ctx); err != nil || len(apis) != 1 {
		t.Fatalf("read-only List: %v, %v", apis, err)
	}
	_, err = l.Take(ctx, childKey, quota.Units(childBudget, 1))
	if !errors.Is(err, sqlitestore.ErrReadOnly) {
		t.Fatalf("read-only Take: %v; want ErrReadOnly", err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if after := fileSum(t, path); after != before {
		t.Fatal("a read-only open changed the file")
	}
	for _, f := range []string{path + "-wal", path + "-shm", path + "-journal"} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s exists after a read-only open: %v", f, err)
		}
	}
	// A missing file is not created.
	missing := filepath.Join(t.TempDir(), "none.db")
	if _, err := sqlitestore.Open(missing, sqlitestore.WithReadOnly()); !errors.Is(err, quota.ErrNotFound) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("read-only open of a missing file: %v; want ErrNotFound naming it", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a read-only open created %s", missing)
	}
}

// TestReadOnlyByAnotherUser is the operator who may read but not write a
// 0644 database in a directory of another user: a read-only open inspects
// it, whether or not a process has it open (WAL and shared memory present,
// or not); a read-write open cannot. Run as root, the test runs its
// inspecting process as nobody (root ignores file modes); otherwise it
// makes the file and directory read-only.
func TestReadOnlyByAnotherUser(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	dir, err := os.MkdirTemp("", "sqlitestore-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o755); _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "quota.db")
	st, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	mustTake(t, mpLimiter(t, st, 100, at), 42)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	bin := os.Args[0]
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		// The test binary must be reachable by nobody: copy it beside.
		bin = filepath.Join(dir, "sqlitestore.test")
		copyFile(t, os.Args[0], bin, 0o755)
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	inspect := func(readOnly bool) (childLine, string) {
		t.Helper()
		js, _ := json.Marshal(childCfg{Path: path, Limit: 100, Clock: at, ReadOnly: readOnly})
		cmd := testkit.Child(t, "inspect", string(js))
		cmd.Path, cmd.Args[0] = bin, bin
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, _ := cmd.Output()
		var l childLine
		if err := json.Unmarshal(out, &l); err != nil {
			t.Fatalf("inspecting child printed %q: %v", out, err)
		}
		return l, string(out)
	}
	check := func(state string) {
		t.Helper()
		if l, out := inspect(true); l.Event != "ok" || l.Used != 42 {
			t.Fatalf("%s: read-only inspection as another user: %s; want used 42", state, out)
		}
	}
	before := fileSum(t, path)
	check("no process has it open")
	// What a read-write open did before: it fails, so the check above
	// tells read-only opens from others.
	if l, out := inspect(false); l.Event != "error" {
		t.Fatalf("a read-write open as another user succeeded (%s): the test cannot tell read-only from not", out)
	}
	if fileSum(t, path) != before {
		t.Fatal("the file changed")
	}
	// Now with a writer holding it open (its WAL and shared memory exist).
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	check("a writer has it open")
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReadOnlySeesLaterWrites is a long-running reader (quotactl serve):
// a handle opened read-only before any writer, while the file has no WAL,
// sees what other handles and processes charge afterwards, whether the
// writer has closed again (its WAL checkpointed and deleted) or still has
// the file open (the charge only in its WAL); and it still leaves no file
// of its own beside the database.
func TestReadOnlySeesLaterWrites(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "quota.db")
	st, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	mustTake(t, mpLimiter(t, st, 1000, at), 5)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the writer left a WAL (%v): the test would not start from a file alone", err)
	}

	ro, err := sqlitestore.Open(path, sqlitestore.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	l := mpLimiter(t, ro, 1000, at)
	used := func(state string, want int64) {
		t.Helper()
		us, err := l.Status(ctx, childKey)
		if err != nil || us[0].Used != want {
			t.Fatalf("%s: read-only Status: %v, %v; want used %d", state, us, err, want)
		}
	}
	used("before any write", 5)

	// Another handle charges and closes: the WAL is gone, the charge is in
	// the file.
	w, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	mustTake(t, mpLimiter(t, w, 1000, at), 7)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	used("after a writer closed", 12)

	// A new credential shows in List.
	w, err = sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	other := quota.Credential{Secret: "another-key", Label: "other"}
	if _, err := mpLimiter(t, w, 1000, at).Take(ctx, other, quota.Units(childBudget, 1)); err != nil {
		t.Fatal(err)
	}
	// The writer stays open: the next charges are in its WAL only.
	mustTake(t, mpLimiter(t, w, 1000, at), 3)
	used("while a writer has it open", 15)
	apis, err := ro.List(ctx)
	if err != nil || len(apis) != 1 || len(apis[0].Credentials) != 2 {
		t.Fatalf("read-only List while a writer has it open: %+v, %v; want 2 credentials", apis, err)
	}
	mustTake(t, mpLimiter(t, w, 1000, at), 4)
	used("after another charge by the open writer", 19)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	used("after the writer closed", 19)

	// Another process.
	granted := chargeInChild(t, path, 1000, at)
	used("after another process charged", 19+granted)

	// Closed, the reader holds nothing: the next writer to close removes
	// the WAL (the reader's open connections kept it while they lived).
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	w, err = sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{path + "-wal", path + "-shm", path + "-journal"} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after the read-only handle and the writers closed: %v", f, err)
		}
	}
}

// TestWriterRefusesUnwritableFile: a read-write Open of a database this
// process may read but not write (an operator running a writing command as
// the wrong user) fails at once, saying so, and leaves nothing beside the
// file. Before, it opened, failed every decision with "attempt to write a
// readonly database", and left a -wal and -shm of its own user beside the
// file: staged with the file's owner a third user, every decision of the
// owner then failed the same way until someone deleted them.
func TestWriterRefusesUnwritableFile(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	dir, err := os.MkdirTemp("", "sqlitestore-unwritable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "quota.db")
	st, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	mustTake(t, mpLimiter(t, st, 100, at), 42)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	bin := os.Args[0]
	var cred *syscall.Credential
	mode := os.FileMode(0o444) // our own file, read-only
	if os.Geteuid() == 0 {     // root ignores file modes: open it as nobody
		bin = filepath.Join(dir, "sqlitestore.test")
		copyFile(t, os.Args[0], bin, 0o755)
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
		mode = 0o644
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil { // anyone may create files beside it
		t.Fatal(err)
	}
	before := fileSum(t, path)
	open := func() (childLine, []byte) {
		t.Helper()
		js, _ := json.Marshal(childCfg{Path: path, Limit: 100, Clock: at})
		cmd := testkit.Child(t, "inspect", string(js))
		cmd.Path, cmd.Args[0] = bin, bin
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, _ := cmd.Output()
		var l childLine
		if err := json.Unmarshal(out, &l); err != nil {
			t.Fatalf("child printed %q: %v", out, err)
		}
		return l, out
	}
	l, out := open()
	if l.Event != "error" || !strings.Contains(l.Err, "not writable") || !strings.Contains(l.Err, path) {
		t.Errorf("read-write open of a file this process cannot write: %s; want an error at open naming the file as not writable", out)
	}
	for _, f := range []string{path + "-wal", path + "-shm"} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s left behind by a process that could not write the database", filepath.Base(f))
		}
	}
	if fileSum(t, path) != before {
		t.Error("the file changed")
	}

	// The file writable, its directory not: SQLite cannot create the WAL
	// and shared memory, and the error says where.
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o755)
	if l, out := open(); l.Event != "error" || !strings.Contains(l.Err, "the directory "+dir+" is not writable") {
		t.Errorf("read-write open in a directory this process cannot write: %s; want an error naming the directory", out)
	}
}
