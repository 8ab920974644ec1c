package costs

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

type specDecoder struct {
	lines lineMap
}

func (d *specDecoder) errf(n *node, field, format string, args ...any) error {
	return &SpecError{Line: n.line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// fields walks a mapping, calling fn for each known key and failing on
// unknown or duplicate keys.
func (d *specDecoder) fields(n *node, field string, known []string, fn func(key string, v *node, field string) error) error {
	if n.kind != mapNode {
		return d.errf(n, field, "want a mapping, got %s", n.describe())
	}
	seen := map[string]int{}
	for i, k := range n.keys {
		f := k.text
		if field != "" {
			f = field + "." + k.text
		}
		if prev, dup := seen[k.text]; dup {
			return d.errf(k, f, "duplicate field (first on line %d)", prev)
		}
		seen[k.text] = k.line
		ok := false
		for _, kn := range known {
			ok = ok || kn == k.text
		}
		if !ok {
			return d.errf(k, f, "unknown field %q (want one of: %s)", k.text, strings.Join(known, ", "))
		}
		d.lines[f] = k.line
		if err := fn(k.text, n.items[i], f); err != nil {
			return err
		}
	}
	return nil
}

func (d *specDecoder) spec(root *node) (Spec, error) {
	var s Spec
	err := d.fields(root, "", []string{"api", "source", "hosts", "owner", "refusal", "credential", "budgets", "spend", "default", "methods", "responses", "reports"}, func(key string, v *node, f string) error {
		var err error
		switch key {
		case "api":
			s.API, err = d.str(v, f)
		case "source":
			s.Source, err = d.str(v, f)
		case "hosts":
			s.Hosts, err = d.list(v, f, "leave hosts out to price requests to any host")
		case "owner":
			s.Owner, err = d.str(v, f)
		case "refusal":
			s.Refusal, err = d.str(v, f)
		case "credential":
			s.Credential, err = d.str(v, f)
		case "budgets":
			s.Budgets, err = d.budgets(v, f)
		case "spend":
			s.Spend, err = d.spend(v, f)
		case "default":
			s.Default, err = d.cost(v, f)
		case "methods":
			s.Methods, err = d.methods(v, f)
		case "responses":
			s.Responses, err = d.rules(v, f)
		case "reports":
			s.Reports, err = d.reports(v, f)
		}
		return err
	})
	if err != nil {
		return Spec{}, err
	}
	if s.API == "" {
		return Spec{}, d.errf(root, "api", "missing: name the API, e.g. api: youtube")
	}
	return s, nil
}

func (d *specDecoder) str(n *node, field string) (string, error) {
	if n.kind != scalarNode {
		return "", d.errf(n, field, "want a string, got %s", n.describe())
	}
	return n.text, nil
}

func (d *specDecoder) int(n *node, field string) (int64, error) {
	if n.kind != scalarNode || n.str {
		return 0, d.errf(n, field, "want an integer, got %s", n.describe())
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(n.text, "_", ""), 10, 64)
	if err != nil {
		return 0, d.errf(n, field, "want an integer, got %s", n.describe())
	}
	return v, nil
}

func (d *specDecoder) bool(n *node, field string) (bool, error) {
	if n.kind == scalarNode && !n.str {
		switch n.text {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
	}
	return false, d.errf(n, field, "want true or false, got %s", n.describe())
}

// strs reads a list of strings, or a single string as a list of one.
func (d *specDecoder) strs(n *node, field string) ([]string, error) {
	if n.kind == scalarNode {
		d.lines[field+"[0]"] = n.line
		return []string{n.text}, nil
	}
	if n.kind != listNode {
		return nil, d.errf(n, field, "want a list of strings, got %s", n.describe())
	}
	out := make([]string, 0, len(n.items))
	for i, it := range n.items {
		f := fmt.Sprintf("%s[%d]", field, i)
		d.lines[f] = it.line
		s, err := d.str(it, f)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// list reads a non-empty list of strings (or one string): an explicit empty
// list is an error saying what to write instead (hint), so that a table has
// one meaning and one form.
func (d *specDecoder) list(n *node, field, hint string) ([]string, error) {
	out, err := d.strs(n, field)
	if err == nil && len(out) == 0 {
		return nil, d.errf(n, field, "empty list: %s", hint)
	}
	return out, err
}

// duration reads a Go duration ("24h"), or an integer of nanoseconds (the
// form a Spec marshals to in JSON).
func (d *specDecoder) duration(n *node, field string) (time.Duration, error) {
	if n.kind == scalarNode && !n.str {
		if v, err := strconv.ParseInt(n.text, 10, 64); err == nil {
			return time.Duration(v), nil
		}
	}
	if n.kind == scalarNode {
		if v, err := time.ParseDuration(n.text); err == nil {
			return v, nil
		}
	}
	return 0, d.errf(n, field, "want a duration such as 24h, got %s", n.describe())
}

func (d *specDecoder) budgets(n *node, field string) ([]quota.Budget, error) {
	if n.kind != listNode {
		return nil, d.errf(n, field, "want a list of budgets, got %s", n.describe())
	}
	var out []quota.Budget
	for i, it := range n.items {
		f := fmt.Sprintf("%s[%d]", field, i)
		d.lines[f] = it.line
		var b quota.Budget
		var hasWindow, hasLimit bool
		err := d.fields(it, f, []string{"name", "limit", "window", "unit"}, func(key string, v *node, f string) error {
			var err error
			switch key {
			case "name":
				b.Name, err = d.str(v, f)
			case "limit":
				hasLimit = true
				b.Limit, err = d.int(v, f)
			case "window":
				hasWindow = true
				b.Window, err = d.window(v, f)
			case "unit":
				b.Unit, err = d.unit(v, f)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		switch {
		case b.Name == "":
			return nil, d.errf(it, f+".name", "missing budget name")
		case !hasLimit:
			return nil, d.errf(it, f+".limit", "missing limit for budget %q", b.Name)
		case !hasWindow:
			return nil, d.errf(it, f+".window", "missing window for budget %q, e.g. daily:America/Los_Angeles, monthly:UTC or sliding:24h", b.Name)
		}
		out = append(out, b)
	}
	return out, nil
}

// window reads a window as quota.ParseWindow does.
func (d *specDecoder) window(n *node, field string) (quota.Window, error) {
	s, err := d.str(n, field)
	if err != nil {
		return quota.Window{}, err
	}
	w, err := quota.ParseWindow(s)
	if err != nil {
		return quota.Window{}, d.errf(n, field, "%s", trimInvalid(err))
	}
	return w, nil
}

// unit reads a budget's unit: a name such as tokens, requests, points or
// usd-micro.
func (d *specDecoder) unit(n *node, field string) (string, error) {
	s, err := d.str(n, field)
	if err != nil {
		return "", err
	}
	if err := backend.CheckName("unit", s); err != nil {
		return "", d.errf(n, field, "%s, e.g. tokens, requests, points or %s", trimInvalid(err), quota.UnitUSDMicro)
	}
	return s, nil
}

// strMap reads a non-empty mapping of strings to strings (numbers are read
// as written: {x-ratelimit-remaining: 0} is "0").
func (d *specDecoder) strMap(n *node, field string) (map[string]string, error) {
	if n.kind != mapNode {
		return nil, d.errf(n, field, "want a mapping of header names to values, e.g. {x-ratelimit-remaining: \"0\"}, got %s", n.describe())
	}
	if len(n.keys) == 0 {
		return nil, d.errf(n, field, "empty mapping: leave it out to match any headers")
	}
	out := make(map[string]string, len(n.keys))
	for i, k := range n.keys {
		f := field + "." + k.text
		if _, dup := out[k.text]; dup {
			return nil, d.errf(k, f, "duplicate key")
		}
		d.lines[f] = k.line
		v, err := d.str(n.items[i], f)
		if err != nil {
			return nil, err
		}
		out[k.text] = v
	}
	return out, nil
}

func (d *specDecoder) cost(n *node, field string) (map[string]int64, error) {
	if n.kind != mapNode {
		return nil, d.errf(n, field, "want units per budget, e.g. {units: 1}, got %s", n.describe())
	}
	out := make(map[string]int64, len(n.keys))
	for i, k := range n.keys {
		f := field + "." + k.text
		if _, dup := out[k.text]; dup {
			return nil, d.errf(k, f, "duplicate budget")
		}
		d.lines[f] = k.line
		v, err := d.int(n.items[i], f)
		if err != nil {
			return nil, err
		}
		out[k.text] = v
	}
	return out, nil
}

func (d *specDecoder) methods(n *node, field string) ([]Method, error) {
	if n.kind == listNode {
		return d.methodList(n, field)
	}
	if n.kind != mapNode {
		return nil, d.errf(n, field, "want a mapping of method names to {routes, cost}, got %s", n.describe())
	}
	var out []Method
	seen := map[string]int{}
	for i, k := range n.keys {
		f := field + "[" + k.text + "]"
		if prev, dup := seen[k.text]; dup {
			return nil, d.errf(k, f, "duplicate method (first on line %d)", prev)
		}
		seen[k.text] = k.line
		d.lines[f] = k.line
		d.lines[fmt.Sprintf("%s[%d].name", field, len(out))] = k.line
		m, err := d.method(n.items[i], f, k.text, false)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// methodList reads methods written as a list of {name, routes, cost}, the
// form Spec marshals to.
func (d *specDecoder) methodList(n *node, field string) ([]Method, error) {
	var out []Method
	seen := map[string]int{}
	for i, it := range n.items {
		f := fmt.Sprintf("%s[%d]", field, i)
		d.lines[f] = it.line
		d.lines[f+".name"] = it.line
		m, err := d.method(it, f, "", true)
		if err != nil {
			return nil, err
		}
		if m.Name == "" {
			return nil, d.errf(it, f+".name", "missing method name")
		}
		named := field + "[" + m.Name + "]"
		if prev, dup := seen[m.Name]; dup {
			return nil, d.errf(it, named, "duplicate method (first on line %d)", prev)
		}
		seen[m.Name] = it.line
		// Copy the item's lines under the name New uses in its errors.
		for k, l := range d.lines {
			if rest, ok := strings.CutPrefix(k, f); ok && (rest == "" || rest[0] == '.') {
				d.lines[named+rest] = l
			}
		}
		out = append(out, m)
	}
	return out, nil
}

func (d *specDecoder) method(n *node, field, name string, withName bool) (Method, error) {
	m := Method{Name: name}
	known := []string{"routes", "cost", "free", "note", "deprecated", "body"}
	if withName {
		known = append([]string{"name"}, known...)
	}
	err := d.fields(n, field, known, func(key string, v *node, f string) error {
		var err error
		switch key {
		case "name":
			m.Name, err = d.str(v, f)
		case "routes":
			m.Routes, err = d.strs(v, f)
		case "cost":
			m.Cost, err = d.cost(v, f)
		case "free":
			m.Free, err = d.bool(v, f)
		case "note":
			m.Note, err = d.str(v, f)
		case "deprecated":
			m.Deprecated, err = d.str(v, f)
		case "body":
			m.Body, err = d.body(v, f)
		}
		return err
	})
	return m, err
}

func (d *specDecoder) rules(n *node, field string) ([]Rule, error) {
	if n.kind != listNode {
		return nil, d.errf(n, field, "want a list of rules, got %s", n.describe())
	}
	var out []Rule
	for i, it := range n.items {
		f := fmt.Sprintf("%s[%d]", field, i)
		d.lines[f] = it.line
		var r Rule
		err := d.fields(it, f, []string{"status", "reasons", "limits", "messages", "headers", "exhaust", "reset_header", "retry", "hold", "for", "source"}, func(key string, v *node, f string) error {
			var err error
			switch key {
			case "status":
				var s int64
				s, err = d.int(v, f)
				r.Status = int(s)
				if s != int64(r.Status) {
					err = d.errf(v, f, "status %d out of range", s)
				}
			case "reasons":
				r.Reasons, err = d.list(v, f, "leave reasons out to match any reason")
			case "limits":
				r.Limits, err = d.list(v, f, "leave limits out to match any quota limit")
			case "messages":
				r.Messages, err = d.list(v, f, "leave messages out to match any message")
			case "headers":
				r.Headers, err = d.strMap(v, f)
			case "reset_header":
				r.ResetHeader, err = d.str(v, f)
			case "exhaust":
				r.Exhaust, err = d.list(v, f, "name the budgets, or \"*\" for all the method charges")
			case "retry":
				r.Retry, err = d.bool(v, f)
			case "hold":
				r.Hold, err = d.list(v, f, "name the budgets whose methods the credential may not call")
			case "for":
				r.For, err = d.duration(v, f)
			case "source":
				r.Source, err = d.str(v, f)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (d *specDecoder) reports(n *node, field string) ([]ReportSpec, error) {
	if n.kind != listNode {
		return nil, d.errf(n, field, "want a list of reports, e.g. [{format: github, budgets: {core: core}}], got %s", n.describe())
	}
	var out []ReportSpec
	for i, it := range n.items {
		f := fmt.Sprintf("%s[%d]", field, i)
		d.lines[f] = it.line
		var r ReportSpec
		err := d.fields(it, f, []string{"format", "budgets", "default"}, func(key string, v *node, f string) error {
			var err error
			switch key {
			case "format":
				r.Format, err = d.str(v, f)
			case "budgets":
				r.Budgets, err = d.scopeMap(v, f)
			case "default":
				r.Default, err = d.str(v, f)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// scopeMap reads a mapping of upstream scopes to budget names.
func (d *specDecoder) scopeMap(n *node, field string) (map[string]string, error) {
	if n.kind != mapNode {
		return nil, d.errf(n, field, "want a mapping of upstream scopes to budgets, e.g. {core: core}, got %s", n.describe())
	}
	out := make(map[string]string, len(n.keys))
	for i, k := range n.keys {
		f := field + "." + k.text
		d.lines[f] = k.line
		v, err := d.str(n.items[i], f)
		if err != nil {
			return nil, err
		}
		out[k.text] = v
	}
	return out, nil
}
