package sqlitestore

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// ErrReplaced is wrapped (with backend.ErrStoreUnavailable) by every
// operation of a Store whose database file was deleted or replaced at its
// path after the Store opened it: the Store's connections still hold the
// old file, while other processes open the new one, so going on would split
// the accounting between two files (each admitting up to the limit). The
// Store fails closed from then on; a new Open uses the file now at the path.
// When the database file itself went, the first decision that finds it also
// marks every budget the old file still counts as spent in the file now at
// the path (creating it if need be) until that usage would have expired, so
// that the processes opening the path from then on do not admit it again.
var ErrReplaced = errors.New("sqlitestore: database file deleted or replaced since it was opened")

// ident is the identity (device and inode, through os.SameFile) of the
// files a Store opened: the database, its WAL and its shared memory (the
// -shm file, which holds SQLite's locks in WAL mode: a process that makes a
// new one after it was deleted takes its write lock there, unseen by the
// processes still holding the old one, and both write at once).
type ident struct {
	path, walPath, shmPath string      // absolute: a later Chdir changes nothing
	db, wal, shm           os.FileInfo // wal, shm nil when there was none to see
	lost                   atomic.Pointer[error]
	// carry is set when the database file itself was deleted or replaced:
	// the usage it records must be carried to the file at the path (see
	// Store.carry), once.
	carry atomic.Bool
	// ckpt is set when the WAL was deleted or replaced: the decisions this
	// Store committed since the last checkpoint are only in the WAL it
	// still holds, and must be checkpointed into the database, once.
	ckpt atomic.Bool
}

// remember records the identity of the files at path now.
func (id *ident) remember(path string) error {
	id.path, id.walPath, id.shmPath = path, path+"-wal", path+"-shm"
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	id.db = fi
	if fi, err := os.Stat(id.walPath); err == nil {
		id.wal = fi
	}
	if fi, err := os.Stat(id.shmPath); err == nil {
		id.shm = fi
	}
	return nil
}

// check reports an error wrapping ErrReplaced when the file at the path
// (or its WAL, or its shared memory) is no longer the one the Store
// opened. Once it has, it always does. Three stat calls: cheap enough for
// every decision (see BenchmarkIdentityCheck).
func (id *ident) check() error {
	if p := id.lost.Load(); p != nil {
		return *p
	}
	if id.db == nil {
		return nil
	}
	path := id.path
	switch fi, err := os.Stat(path); {
	case errors.Is(err, os.ErrNotExist):
		return id.loseFile(fmt.Errorf("%w: %s no longer exists; restart to open a new one", ErrReplaced, path))
	case err != nil:
		return err // transient: say so, decide nothing
	case !os.SameFile(fi, id.db):
		return id.loseFile(fmt.Errorf("%w: %s is another file now; restart to open it", ErrReplaced, path))
	}
	if err := id.checkCompanion(id.walPath, id.wal, "WAL", &id.ckpt); err != nil {
		return err
	}
	return id.checkCompanion(id.shmPath, id.shm, "shared memory (its lock file)", nil)
}

// checkCompanion checks that the file at path is still want, the WAL or
// shared memory the Store opened (nothing to check when want is nil).
// When this call finds it first, it sets first (if not nil).
func (id *ident) checkCompanion(path string, want os.FileInfo, what string, first *atomic.Bool) error {
	if want == nil {
		return nil
	}
	var lost error
	switch fi, err := os.Stat(path); {
	case errors.Is(err, os.ErrNotExist):
		lost = fmt.Errorf("%w: its %s %s no longer exists; restart to open the database again", ErrReplaced, what, path)
	case err != nil:
		return err
	case !os.SameFile(fi, want):
		lost = fmt.Errorf("%w: its %s %s is another file now; restart to open the database again", ErrReplaced, what, path)
	default:
		return nil
	}
	return id.loseFirst(lost, first)
}

// loseFirst records err as the Store's loss of its file, unless one was
// recorded first, and returns the one recorded; first (if not nil) is set
// when err is.
func (id *ident) loseFirst(err error, first *atomic.Bool) error {
	if id.lost.CompareAndSwap(nil, &err) && first != nil {
		first.Store(true)
	}
	return *id.lost.Load()
}

// loseFile is loseFirst for the database file itself: its usage is to be
// carried to the file now at the path.
func (id *ident) loseFile(err error) error { return id.loseFirst(err, &id.carry) }
