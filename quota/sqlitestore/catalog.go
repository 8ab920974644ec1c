package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/quotactl/quotactl/quota"
)

// DefineBudgets implements quota.Store. A window must survive its text
// form (quota.ParseWindow), so a daily window needs an IANA zone name
// ("America/Los_Angeles", "UTC", "Local"), not a time.FixedZone.
func (s *Store) DefineBudgets(ctx context.Context, api string, budgets []quota.Budget) error {
	if err := quota.CheckName("api", api); err != nil {
		return fmt.Errorf("sqlitestore: define budgets: %w", err)
	}
	for _, b := range budgets {
		if err := quota.ValidateBudgets([]quota.Budget{b}); err != nil {
			return fmt.Errorf("sqlitestore: define budgets of %q: %w", api, err)
		}
		if w, err := quota.ParseWindow(b.Window.String()); err != nil || w.String() != b.Window.String() {
			return fmt.Errorf("sqlitestore: define budgets of %q: %w: budget %q: window %s cannot be stored: give a daily window an IANA zone name",
				api, quota.ErrInvalid, b.Name, b.Window)
		}
	}
	return s.write(ctx, "define budgets", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO apis (name) VALUES (?) ON CONFLICT DO NOTHING`, api); err != nil {
			return err
		}
		for _, b := range budgets {
			if _, err := tx.ExecContext(ctx, `INSERT INTO budgets (api, name, "limit", "window") VALUES (?, ?, ?, ?)
				ON CONFLICT (api, name) DO UPDATE SET "limit" = excluded."limit", "window" = excluded."window"`,
				api, b.Name, b.Limit, b.Window.String()); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteBudget implements quota.Store. A budget that is not defined gives
// an error wrapping quota.ErrNotFound.
func (s *Store) DeleteBudget(ctx context.Context, api, budget string) error {
	return s.write(ctx, "delete budget", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM budgets WHERE api = ? AND name = ?`, api, budget)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("sqlitestore: delete budget %s/%s: %w", api, budget, quota.ErrNotFound)
		}
		return nil
	})
}

// RememberCredential implements quota.Store. Only the fingerprint and the
// label are stored.
func (s *Store) RememberCredential(ctx context.Context, api string, c quota.CredentialInfo) error {
	if err := quota.CheckName("api", api); err != nil {
		return fmt.Errorf("sqlitestore: remember credential: %w", err)
	}
	if c.ID == "" {
		return fmt.Errorf("sqlitestore: remember credential: %w: empty fingerprint", quota.ErrInvalid)
	}
	return s.write(ctx, "remember credential", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO apis (name) VALUES (?) ON CONFLICT DO NOTHING`, api); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO creds (api, fp, label) VALUES (?, ?, ?)
			ON CONFLICT (api, fp) DO UPDATE SET label = excluded.label WHERE excluded.label <> ''`, api, c.ID, c.Label)
		return err
	})
}

// List implements quota.Store.
func (s *Store) List(ctx context.Context) ([]quota.APIInfo, error) {
	var out []quota.APIInfo
	err := s.read(ctx, "list", func(tx *sql.Tx) error {
		out = []quota.APIInfo{}
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
			out = append(out, quota.APIInfo{Name: name, Budgets: []quota.Budget{}, Credentials: []quota.CredentialInfo{}})
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()

		rows, err = tx.QueryContext(ctx, `SELECT api, name, "limit", "window" FROM budgets ORDER BY api, name`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var api, win string
			var b quota.Budget
			if err := rows.Scan(&api, &b.Name, &b.Limit, &win); err != nil {
				return err
			}
			if b.Window, err = quota.ParseWindow(win); err != nil {
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

		rows, err = tx.QueryContext(ctx, `SELECT api, fp, label FROM creds ORDER BY api, fp`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var api string
			var c quota.CredentialInfo
			if err := rows.Scan(&api, &c.ID, &c.Label); err != nil {
				return err
			}
			if i, ok := index[api]; ok {
				out[i].Credentials = append(out[i].Credentials, c)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
