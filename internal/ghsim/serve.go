package ghsim

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// anonPrefix marks the owner of unauthenticated requests: the client IP.
const anonPrefix = "ip:"

// Documentation URLs GitHub's error bodies carry.
const (
	primaryDocURL   = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
	secondaryDocURL = "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
)

// resourceOf returns the resource a request counts against, "" for GET
// /rate_limit (which counts against none).
func resourceOf(r *http.Request) string {
	p := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case p == "/rate_limit":
		return ""
	case p == "/graphql":
		return GraphQL
	case p == "/search/code":
		return CodeSearch
	case strings.HasPrefix(p, "/search/"):
		return Search
	}
	return Core
}

// token returns the request's token: "Authorization: Bearer T" or
// "Authorization: token T", as GitHub accepts both.
func token(r *http.Request) string {
	a := r.Header.Get("Authorization")
	for _, scheme := range []string{"bearer ", "token "} {
		if len(a) > len(scheme) && strings.EqualFold(a[:len(scheme)], scheme) {
			return strings.TrimSpace(a[len(scheme):])
		}
	}
	return ""
}

// ServeHTTP serves one API request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var gql gqlRequest
	if r.Method == http.MethodPost && strings.TrimSuffix(r.URL.Path, "/") == "/graphql" {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err := json.Unmarshal(body, &gql); err != nil || strings.TrimSpace(gql.Query) == "" {
			s.mu.Lock()
			s.requests++
			s.mu.Unlock()
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON", "documentation_url": "https://docs.github.com/graphql"})
			return
		}
	}
	tok := token(r)
	owner := s.Owner(tok)
	if tok == "" {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		owner = anonPrefix + host
	}
	resource := resourceOf(r)
	now := s.clock()

	s.mu.Lock()
	s.requests++
	s.seq++
	reqID := fmt.Sprintf("SIM%04X:%06X", s.seq%0x10000, s.seq)
	w.Header().Set("X-GitHub-Request-Id", reqID)
	if resource == "" { // GET /rate_limit: the document, no primary count
		doc := s.rateDoc(owner, now)
		s.writeHeaders(w, owner, Core, now)
		s.served++
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, doc)
		return
	}
	cost := int64(1)
	if resource == GraphQL {
		cost = max(s.gqlCost(gql.Query, gql.Variables), 1)
	}
	if !s.canPay(owner, resource, cost, now) {
		s.primary++
		s.writeHeaders(w, owner, resource, now)
		s.mu.Unlock()
		s.writePrimary(w, owner, resource, reqID)
		return
	}
	if wait, ok := s.chargeSecondary(owner, r, gql, now); !ok {
		s.second++
		s.writeHeaders(w, owner, resource, now)
		s.mu.Unlock()
		s.writeSecondary(w, wait, reqID)
		return
	}
	s.chargePrimary(owner, resource, cost, now)
	s.served++
	s.writeHeaders(w, owner, resource, now)
	s.mu.Unlock()
	serve(w, r, resource)
}

// current returns the owner's open window for resource at now, or nil.
func (s *Server) current(owner, resource string, now time.Time) *window {
	w := s.windows[owner][resource]
	if w == nil || !now.Before(w.end) {
		return nil
	}
	return w
}

// windowLen returns a resource's window length.
func windowLen(resource string) time.Duration {
	if r, ok := defaultResources[resource]; ok {
		return r.window
	}
	return time.Hour
}

// open returns the owner's window for resource at now, starting one at now
// when none is open. Its end is in whole seconds, as x-ratelimit-reset.
func (s *Server) open(owner, resource string, now time.Time) *window {
	if w := s.current(owner, resource, now); w != nil {
		return w
	}
	m := s.windows[owner]
	if m == nil {
		m = map[string]*window{}
		s.windows[owner] = m
	}
	w := &window{start: now, end: ceilSecond(now.Add(windowLen(resource)))}
	m[resource] = w
	return w
}

func ceilSecond(t time.Time) time.Time {
	if c := t.Truncate(time.Second); !c.Equal(t) {
		return c.Add(time.Second)
	}
	return t
}

// canPay reports whether the owner's window for resource has room for cost.
func (s *Server) canPay(owner, resource string, cost int64, now time.Time) bool {
	used := int64(0)
	if w := s.current(owner, resource, now); w != nil {
		used = w.used
	}
	return used+cost <= s.Limit(owner, resource)
}

// chargePrimary counts cost against the owner's resource, if it can pay.
func (s *Server) chargePrimary(owner, resource string, cost int64, now time.Time) (*window, bool) {
	if !s.canPay(owner, resource, cost, now) {
		return nil, false
	}
	w := s.open(owner, resource, now)
	w.used += cost
	m := s.spent[owner]
	if m == nil {
		m = map[string]int64{}
		s.spent[owner] = m
	}
	m[resource] += cost
	return w, true
}

// secondaryPoints returns a request's points for the secondary limit.
func secondaryPoints(r *http.Request, gql gqlRequest) int64 {
	if gql.Query != "" {
		if isMutation(gql.Query) {
			return 5
		}
		return 1
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return 1
	}
	return 5
}

// chargeSecondary counts the request's points against its endpoint's
// secondary limit; when they do not fit it returns the wait until the
// endpoint's window ends.
func (s *Server) chargeSecondary(owner string, r *http.Request, gql gqlRequest, now time.Time) (time.Duration, bool) {
	endpoint := strings.TrimSuffix(r.URL.Path, "/")
	limit := s.secondaryREST
	if endpoint == "/graphql" {
		limit = s.secondaryGQL
	}
	if limit <= 0 {
		return 0, true
	}
	points := secondaryPoints(r, gql)
	m := s.secondary[owner]
	if m == nil {
		m = map[string]*window{}
		s.secondary[owner] = m
	}
	w := m[endpoint]
	if w == nil || !now.Before(w.end) {
		w = &window{start: now, end: now.Add(time.Minute)}
		m[endpoint] = w
	}
	if w.used+points > limit {
		return w.end.Sub(now), false
	}
	w.used += points
	return 0, true
}

// writeHeaders sets the x-ratelimit-* fields of the owner's resource.
func (s *Server) writeHeaders(w http.ResponseWriter, owner, resource string, now time.Time) {
	limit := s.Limit(owner, resource)
	used, reset := int64(0), ceilSecond(now.Add(windowLen(resource)))
	if win := s.current(owner, resource, now); win != nil {
		used, reset = win.used, win.end
	}
	h := w.Header()
	h.Set("X-Ratelimit-Limit", strconv.FormatInt(limit, 10))
	h.Set("X-Ratelimit-Remaining", strconv.FormatInt(max(limit-used, 0), 10))
	h.Set("X-Ratelimit-Used", strconv.FormatInt(used, 10))
	h.Set("X-Ratelimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("X-Ratelimit-Resource", resource)
}

// RateResource is one resource of the GET /rate_limit document.
type RateResource struct {
	Limit     int64 `json:"limit"`
	Used      int64 `json:"used"`
	Remaining int64 `json:"remaining"`
	Reset     int64 `json:"reset"`
}

// RateLimitDoc is the body of GET /rate_limit: every resource, and "rate"
// (deprecated upstream) repeating core.
type RateLimitDoc struct {
	Resources map[string]RateResource `json:"resources"`
	Rate      RateResource            `json:"rate"`
}

func (s *Server) rateDoc(owner string, now time.Time) RateLimitDoc {
	doc := RateLimitDoc{Resources: map[string]RateResource{}}
	for _, res := range []string{Core, Search, CodeSearch, GraphQL} {
		limit := s.Limit(owner, res)
		rr := RateResource{Limit: limit, Remaining: limit, Reset: ceilSecond(now.Add(windowLen(res))).Unix()}
		if w := s.current(owner, res, now); w != nil {
			rr.Used, rr.Remaining, rr.Reset = w.used, max(limit-w.used, 0), w.end.Unix()
		}
		doc.Resources[res] = rr
	}
	doc.Rate = doc.Resources[Core]
	return doc
}

// userID returns the numeric ID GitHub's message names for owner.
func (s *Server) userID(owner string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.ids[owner]; ok {
		return id
	}
	s.nextID++
	s.ids[owner] = s.nextID
	return s.nextID
}

// writePrimary answers a request refused by a primary limit.
func (s *Server) writePrimary(w http.ResponseWriter, owner, resource, reqID string) {
	var msg string
	if ip, ok := strings.CutPrefix(owner, anonPrefix); ok {
		msg = "API rate limit exceeded for " + ip + ". (But here's the good news: Authenticated requests get a higher rate limit. Check out the documentation for more details.)"
	} else {
		msg = fmt.Sprintf("API rate limit exceeded for user ID %d.", s.userID(owner))
	}
	if resource == GraphQL {
		// "the response status will still be 200, but you will receive an
		// error message"
		writeJSON(w, http.StatusOK, map[string]any{"errors": []map[string]string{{"type": "RATE_LIMITED", "message": msg}}})
		return
	}
	msg += " If you reach out to GitHub Support for help, please include the request ID " + reqID + "."
	writeJSON(w, s.primaryStatus, map[string]string{
		"message": msg, "documentation_url": primaryDocURL, "status": strconv.Itoa(s.primaryStatus),
	})
}

// writeSecondary answers a request refused by the secondary limit.
func (s *Server) writeSecondary(w http.ResponseWriter, wait time.Duration, reqID string) {
	w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
	writeJSON(w, s.secondaryStatus, map[string]string{
		"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. " +
			"If you reach out to GitHub Support for help, please include the request ID " + reqID + ".",
		"documentation_url": secondaryDocURL, "status": strconv.Itoa(s.secondaryStatus),
	})
}

// serve answers a request that passed the limits with a small body of the
// endpoint's shape.
func serve(w http.ResponseWriter, r *http.Request, resource string) {
	switch {
	case resource == GraphQL:
		writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{}})
	case resource == Search || resource == CodeSearch:
		writeJSON(w, http.StatusOK, map[string]any{"total_count": 0, "incomplete_results": false, "items": []any{}})
	case r.Method == http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost:
		writeJSON(w, http.StatusCreated, map[string]any{"url": "https://api.github.com" + r.URL.Path})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"url": "https://api.github.com" + r.URL.Path})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
