package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/quotactl/quotactl/quota/backend"
)

// DefineBudgets implements backend.Store. A window must survive its text
// form (backend.ParseWindow), so a daily or monthly window needs an IANA zone name
// ("America/Los_Angeles", "UTC", "Local"), not a time.FixedZone.
func (s *Store) DefineBudgets(ctx context.Context, api string, budgets []backend.Budget) error {
	if err := backend.CheckName("api", api); err != nil {
		return fmt.Errorf("sqlitestore: define budgets: %w", err)
	}
	for _, b := range budgets {
		if err := backend.ValidateBudgets([]backend.Budget{b}); err != nil {
			return fmt.Errorf("sqlitestore: define budgets of %q: %w", api, err)
		}
		if w, err := backend.ParseWindow(b.Window.String()); err != nil || w.String() != b.Window.String() {
			return fmt.Errorf("sqlitestore: define budgets of %q: %w: budget %q: window %s cannot be stored: give a daily or monthly window an IANA zone name",
				api, backend.ErrInvalid, b.Name, b.Window)
		}
	}
	return s.write(ctx, "define budgets", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO apis (name) VALUES (?) ON CONFLICT DO NOTHING`, api); err != nil {
			return err
		}
		for _, b := range budgets {
			if _, err := tx.ExecContext(ctx, `INSERT INTO budgets (api, name, "limit", "window", unit) VALUES (?, ?, ?, ?, ?)
				ON CONFLICT (api, name) DO UPDATE SET "limit" = excluded."limit", "window" = excluded."window", unit = excluded.unit`,
				api, b.Name, b.Limit, b.Window.String(), b.Unit); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteBudget implements backend.Store. A budget that is not defined gives
// an error wrapping backend.ErrNotFound.
func (s *Store) DeleteBudget(ctx context.Context, api, budget string) error {
	return s.write(ctx, "delete budget", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM budgets WHERE api = ? AND name = ?`, api, budget)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("sqlitestore: delete budget %s/%s: %w", api, budget, backend.ErrNotFound)
		}
		return nil
	})
}

// UpdateCredential implements backend.Store: it reads the API's catalog and
// writes the change in one immediate transaction, so that two processes
// never give one label to two credentials. Only fingerprints, labels and
// owner names are stored.
func (s *Store) UpdateCredential(ctx context.Context, api string, u backend.CredentialUpdate) (backend.CredentialInfo, error) {
	if err := backend.CheckName("api", api); err != nil {
		return backend.CredentialInfo{}, fmt.Errorf("sqlitestore: update credential: %w", err)
	}
	var out backend.CredentialInfo
	err := s.write(ctx, "update credential", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT fp, label, owner FROM creds WHERE api = ?`, api)
		if err != nil {
			return err
		}
		defer rows.Close()
		var creds []backend.CredentialInfo
		for rows.Next() {
			var c backend.CredentialInfo
			if err := rows.Scan(&c.ID, &c.Label, &c.Owner); err != nil {
				return err
			}
			creds = append(creds, c)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		ch, info, err := backend.ApplyCredentialUpdate(api, creds, u)
		if err != nil {
			return fmt.Errorf("sqlitestore: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO apis (name) VALUES (?) ON CONFLICT DO NOTHING`, api); err != nil {
			return err
		}
		for _, c := range ch.Put {
			if _, err := tx.ExecContext(ctx, `INSERT INTO creds (api, fp, label, owner) VALUES (?, ?, ?, ?)
				ON CONFLICT (api, fp) DO UPDATE SET label = excluded.label, owner = excluded.owner`, api, c.ID, c.Label, c.Owner); err != nil {
				return err
			}
		}
		for _, id := range ch.Delete {
			if _, err := tx.ExecContext(ctx, `DELETE FROM creds WHERE api = ? AND fp = ?`, api, id); err != nil {
				return err
			}
		}
		out = info
		return nil
	})
	if err != nil {
		return backend.CredentialInfo{}, err
	}
	return out, nil
}

// List implements backend.Store.
func (s *Store) List(ctx context.Context) ([]backend.APIInfo, error) {
	var out []backend.APIInfo
	err := s.read(ctx, "list", func(tx *sql.Tx) error {
		out = []backend.APIInfo{}
		index := map[string]int{}
		rows, err := tx.QueryContext(ctx, `SELECT name FROM apis ORDER BY name`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				return err
			}
			index[name] = len(out)
			out = append(out, backend.APIInfo{Name: name, Budgets: []backend.Budget{}, Credentials: []backend.CredentialInfo{}})
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()

		// A file written before units, opened read-only, has no unit
		// column: its budgets have the default unit.
		var units int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('budgets') WHERE name = 'unit'`).Scan(&units); err != nil {
			return err
		}
		unitCol := `''`
		if units > 0 {
			unitCol = "unit"
		}
		rows, err = tx.QueryContext(ctx, `SELECT api, name, "limit", "window", `+unitCol+` FROM budgets ORDER BY api, name`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var api, win string
			var b backend.Budget
			if err := rows.Scan(&api, &b.Name, &b.Limit, &win, &b.Unit); err != nil {
				return err
			}
			if b.Window, err = backend.ParseWindow(win); err != nil {
				return fmt.Errorf("stored budget %s/%s: %v", api, b.Name, err)
			}
			if i, ok := index[api]; ok {
				out[i].Budgets = append(out[i].Budgets, b)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()

		rows, err = tx.QueryContext(ctx, `SELECT api, fp, label, owner FROM creds ORDER BY api, fp`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var api string
			var c backend.CredentialInfo
			if err := rows.Scan(&api, &c.ID, &c.Label, &c.Owner); err != nil {
				return err
			}
			if i, ok := index[api]; ok {
				out[i].Credentials = append(out[i].Credentials, c.Filled())
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ensureUnit adds the budgets' unit column to a file made before units
// existed (same schema version: a column older builds ignore; one that
// redefines a budget keeps its recorded unit). The check and the change are
// one immediate transaction, so that two processes opening the file at once
// add it once.
func (s *Store) ensureUnit(ctx context.Context, conn *sql.Conn) error {
	has := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) (bool, error) {
		var n int
		err := q.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('budgets') WHERE name = 'unit'`).Scan(&n)
		return n > 0, err
	}
	if ok, err := has(conn); err != nil {
		return s.openErr(err)
	} else if ok {
		return nil
	}
	tx, err := conn.BeginTx(ctx, nil) // immediate: the DSN of init says so
	if err != nil {
		return s.openErr(err)
	}
	defer tx.Rollback()
	if ok, err := has(tx); err != nil {
		return s.openErr(err)
	} else if ok {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `ALTER TABLE budgets ADD COLUMN unit TEXT NOT NULL DEFAULT ''`); err != nil {
		return s.openErr(err)
	}
	if err := tx.Commit(); err != nil {
		return s.openErr(err)
	}
	return nil
}
