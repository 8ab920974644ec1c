package storeurl

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// String returns the URL in its canonical form with any password replaced
// by "xxxxx". Parse reads it back to the same Spec, less the password.
func (s *Spec) String() string { return s.format(true) }

func (s *Spec) format(redact bool) string {
	switch s.Kind {
	case Memory:
		return "memory:"
	case SQLite:
		u := SQLiteURL(s.Path)
		if s.busyTimeout != nil {
			u += "?busy_timeout=" + s.busyTimeout.String()
		}
		return u
	}
	var b strings.Builder
	b.WriteString(s.scheme)
	b.WriteString("://")
	if s.Username != "" || s.hasPassword {
		pass := s.password
		if redact {
			pass = "xxxxx"
		}
		u := url.User(s.Username)
		if s.hasPassword {
			u = url.UserPassword(s.Username, pass)
		}
		b.WriteString(u.String())
		b.WriteByte('@')
	}
	b.WriteString(strings.Join(s.Addrs, ","))
	switch {
	case s.Kind == Sentinel:
		b.WriteString("/" + url.PathEscape(s.Master))
		if s.DB != 0 {
			b.WriteString("/" + strconv.Itoa(s.DB))
		}
	case s.Kind == Redis && s.DB != 0:
		b.WriteString("/" + strconv.Itoa(s.DB))
	}
	q := url.Values{}
	for _, kv := range s.options {
		q.Add(kv[0], kv[1])
	}
	if s.Prefix != "" {
		q.Set("prefix", s.Prefix)
	}
	if s.AllowEviction {
		q.Set("allow_eviction", "true")
	}
	if s.Replicas > 0 {
		q.Set("replicas", strconv.Itoa(s.Replicas))
	}
	if s.ReplicaTimeout > 0 {
		q.Set("replica_timeout", s.ReplicaTimeout.String())
	}
	if s.Pipelining != 0 {
		q.Set("pipelining", strconv.Itoa(max(s.Pipelining, 0)))
	}
	if s.OpenTimeout > 0 {
		q.Set("open_timeout", s.OpenTimeout.String())
	}
	if s.sentinelUser != "" {
		q.Set("sentinel_username", s.sentinelUser)
	}
	if s.sentinelPassword != "" {
		if redact {
			q.Set("sentinel_password", "xxxxx")
		} else {
			q.Set("sentinel_password", s.sentinelPassword)
		}
	}
	if len(q) > 0 {
		b.WriteByte('?')
		b.WriteString(q.Encode())
	}
	return b.String()
}

// Redact returns rawURL with anything that may be a password replaced by
// "xxxxx": the userinfo's password (up to the URL's last "@", so an
// unescaped "/" or "?" in it is still hidden) and the values of password
// options. It works on malformed URLs too: use it to print a URL a user gave.
// A URL missing its "//" (redis:/:PASSWORD@HOST, redis:PASSWORD@HOST) still
// has what comes before its last "@" hidden; see passwordSpan.
func Redact(rawURL string) string {
	out := rawURL
	if i, j, ok := passwordSpan(out); ok {
		out = out[:i] + "xxxxx" + out[j:]
	}
	for _, key := range []string{"sentinel_password=", "password="} {
		var b strings.Builder
		s := out
		for {
			j := strings.Index(s, key)
			if j < 0 {
				b.WriteString(s)
				break
			}
			b.WriteString(s[:j+len(key)])
			s = s[j+len(key):]
			end := strings.IndexAny(s, "&#")
			if end < 0 {
				end = len(s)
			}
			if s[:end] != "xxxxx" && end > 0 {
				b.WriteString("xxxxx")
			} else {
				b.WriteString(s[:end])
			}
			s = s[end:]
		}
		out = b.String()
	}
	// The same secret anywhere else in the URL (pasted into an option, say).
	return scrub(out, secretsOf(rawURL))
}

// secretsOf returns what Redact hides in rawURL, raw and percent-decoded.
func secretsOf(rawURL string) []string {
	var out []string
	add := func(s string) {
		out = append(out, s)
		if d, err := url.PathUnescape(s); err == nil {
			out = append(out, d)
		}
		if d, err := url.QueryUnescape(s); err == nil {
			out = append(out, d)
		}
	}
	if i, j, ok := passwordSpan(rawURL); ok {
		add(rawURL[i:j])
	}
	for _, key := range []string{"sentinel_password=", "password="} {
		s := rawURL
		for {
			j := strings.Index(s, key)
			if j < 0 {
				break
			}
			s = s[j+len(key):]
			end := strings.IndexAny(s, "&#")
			if end < 0 {
				end = len(s)
			}
			add(s[:end])
			s = s[end:]
		}
	}
	return out
}

// passwordSpan returns where rawURL's password is, rawURL[i:j], if it may
// hold one: the userinfo ends at the last "@" (a password may hold "@", "/"
// or "?" unescaped), and what rawURL is otherwise does not matter, so that a
// malformed URL is redacted as well as a good one.
//
//   - SCHEME://USER:PASSWORD@...: the password is between the userinfo's
//     first ":" and the "@". SCHEME://USER@... holds no password.
//   - SCHEME:[/ or \ ...]USER:PASSWORD@... (the "//" missing or mistyped):
//     the same. Without a ":" after the scheme's, as in SCHEME:PASSWORD@...,
//     the scheme's ":" may have been meant as the separator, so all of it up
//     to the "@" is hidden; except after sqlite:, whose PATH may hold an "@".
//   - No scheme: USER:PASSWORD@... as above; NAME@... holds no password.
func passwordSpan(rawURL string) (i, j int, ok bool) {
	at := strings.LastIndexByte(rawURL, '@')
	if at < 0 {
		return 0, 0, false
	}
	head := rawURL[:at]
	start, afterScheme := 0, false
	if scheme, rest, found := strings.Cut(head, ":"); found && validScheme(scheme) {
		start = len(scheme) + 1
		if strings.HasPrefix(rest, "//") {
			start += 2
		} else {
			for start < len(head) && (head[start] == '/' || head[start] == '\\') {
				start++
			}
			afterScheme = !strings.EqualFold(scheme, "sqlite")
		}
	}
	if c := strings.IndexByte(head[start:], ':'); c >= 0 {
		return start + c + 1, at, true
	}
	if afterScheme && start < at {
		return start, at, true
	}
	return 0, 0, false
}

// scrub replaces every secret in msg by "xxxxx", longest first.
func scrub(msg string, secrets []string) string {
	secrets = slices.Clone(secrets)
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, s := range secrets {
		// Shorter strings would mangle the message; no message quotes a
		// password anyway: this is a second line of defence.
		if len(s) >= 3 && s != "xxxxx" {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
		}
	}
	return msg
}
