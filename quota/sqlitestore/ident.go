package sqlitestore

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// ErrReplaced is wrapped (with quota.ErrStoreUnavailable) by every
// operation of a Store whose database file was deleted or replaced at its
// path after the Store opened it: the Store's connections still hold the
// old file, while other processes open the new one, so going on would split
// the accounting between two files (each admitting up to the limit). The
// Store fails closed from then on; a new Open uses the file now at the path.
var ErrReplaced = errors.New("sqlitestore: database file deleted or replaced since it was opened")

// ident is the identity (device and inode, through os.SameFile) of the
// files a Store opened: the database and its WAL.
type ident struct {
	path, walPath string      // absolute: a later Chdir changes nothing
	db, wal       os.FileInfo // wal nil when there was none to see
	lost          atomic.Pointer[error]
}

// remember records the identity of the files at path now.
func (id *ident) remember(path string) error {
	id.path, id.walPath = path, path+"-wal"
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	id.db = fi
	if fi, err := os.Stat(id.walPath); err == nil {
		id.wal = fi
	}
	return nil
}

// check reports an error wrapping ErrReplaced when the file at the path
// (or its WAL) is no longer the one the Store opened. Once it has, it
// always does. Two stat calls: cheap enough for every decision (see
// BenchmarkIdentityCheck).
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
		return id.lose(fmt.Errorf("%w: %s no longer exists; restart to open a new one", ErrReplaced, path))
	case err != nil:
		return err // transient: say so, decide nothing
	case !os.SameFile(fi, id.db):
		return id.lose(fmt.Errorf("%w: %s is another file now; restart to open it", ErrReplaced, path))
	}
	if id.wal == nil {
		return nil
	}
	switch fi, err := os.Stat(id.walPath); {
	case errors.Is(err, os.ErrNotExist):
		return id.lose(fmt.Errorf("%w: its WAL %s-wal no longer exists; restart to open the database again", ErrReplaced, path))
	case err != nil:
		return err
	case !os.SameFile(fi, id.wal):
		return id.lose(fmt.Errorf("%w: its WAL %s-wal is another file now; restart to open the database again", ErrReplaced, path))
	}
	return nil
}

// lose records err as the Store's loss of its file, unless one was
// recorded first, and returns the one recorded.
func (id *ident) lose(err error) error {
	id.lost.CompareAndSwap(nil, &err)
	return *id.lost.Load()
}
