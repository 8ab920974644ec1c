package proxy

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// ParseOwners reads a key-to-owner file for Config.Owners: one credential
// and its owner per line, separated by spaces ("AIzaSy... my-project"),
// blank lines and lines starting with '#' ignored. name is the file's name
// for errors, which give the line number and never the line: a key is
// never repeated back.
func ParseOwners(name string, r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	lineOf := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: %s:%d: want a credential and its owner separated by spaces, got %d fields", quota.ErrInvalid, name, n, len(f))
		}
		if err := backend.CheckName("owner", f[1]); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if prev, dup := lineOf[f[0]]; dup && out[f[0]] != f[1] {
			return nil, fmt.Errorf("%w: %s:%d: the credential of line %d again, with another owner", quota.ErrInvalid, name, n, prev)
		}
		out[f[0]], lineOf[f[0]] = f[1], n
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s: no credentials: write one \"KEY OWNER\" per line", quota.ErrInvalid, name)
	}
	return out, nil
}
