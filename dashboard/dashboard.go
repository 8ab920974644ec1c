// Package dashboard is a read-only web dashboard over a quota.Store: every
// owner and budget with a usage bar, what is left and when it resets; a chart
// of the window in the budget's own time zone (per hour for a day, in the
// buckets `quotactl history` picks), scaled to the limit; job runs with their outcome and units; and the usage thresholds crossed.
// The page refreshes live over server-sent events and needs no internet
// access: its stylesheet and script are embedded, charts are inline SVG.
//
// The Handler also serves /metrics (Prometheus gauges computed from the
// store, so one dashboard exports the usage of every process that shares the
// store; see promquota.StoreCollector) and /api/... JSON: the types
// `quotactl ... --json` prints, built by the same code, so the field names
// and the numbers are the same:
//
//	GET /api/status       []Status      (quotactl status --json)
//	GET /api/history      []History     (quotactl history --json, of every owner)
//	GET /api/jobs         []Job         (quotactl jobs --json, with recent runs)
//	GET /api/jobs/{name}  Job           (quotactl jobs NAME --json)
//	GET /api/thresholds   Thresholds
//	GET /api/snapshot     Snapshot      (all of the above at one instant)
//
// Nothing it serves holds a credential secret: stores keep only fingerprints
// and labels, and labels are escaped wherever they appear in HTML.
//
// With WithToken, every request must carry the token: an
// "Authorization: Bearer TOKEN" header (scrapers, scripts), or the session
// cookie the login form sets (browsers). The token is compared in constant
// time and never written into a page, a cookie or a log.
package dashboard

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/quotactl/quotactl/internal/bearer"
	"github.com/quotactl/quotactl/internal/view"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/promquota"
)

//go:embed assets
var assets embed.FS

// Handler is the dashboard: an http.Handler over a quota.Store. It only
// reads the store. It is safe for concurrent use. Build one with New.
type Handler struct {
	store   quota.Store
	clock   func() time.Time
	loc     *time.Location
	token   string
	levels  []int64
	refresh time.Duration
	timeout time.Duration
	log     *slog.Logger

	mux    *http.ServeMux
	page   *template.Template
	reader *view.Reader // what the page and /api show

	// The live part, shared by every open page: one store read per half
	// refresh, however many browsers watch.
	liveMu   sync.Mutex
	live     []byte
	liveRead time.Time // host clock
}

var _ http.Handler = (*Handler)(nil)

// Option configures a Handler in New.
type Option func(*Handler)

// WithClock makes the dashboard read usage as of clock's time instead of the
// store's own clock, and show times relative to it. For tests.
func WithClock(clock func() time.Time) Option { return func(h *Handler) { h.clock = clock } }

// WithLocation sets the zone times are shown in, and the zone of a sliding
// budget's hourly chart (a daily budget's chart is always in its own zone).
// Default: time.Local.
func WithLocation(loc *time.Location) Option { return func(h *Handler) { h.loc = loc } }

// WithToken requires every request to carry token (see the package doc). An
// empty token requires nothing: only serve without one on a loopback address.
func WithToken(token string) Option { return func(h *Handler) { h.token = token } }

// WithRefresh sets how often the live page reads the store again. Default 5s.
func WithRefresh(d time.Duration) Option { return func(h *Handler) { h.refresh = d } }

// WithThresholds sets the usage levels, in percent, marked as crossed.
// Default: quota.DefaultThresholds (50, 80, 95, 100), the levels a
// Limiter's Observer is told of.
func WithThresholds(levels ...int) Option {
	return func(h *Handler) {
		h.levels = nil
		for _, l := range levels {
			h.levels = append(h.levels, int64(l))
		}
	}
}

// WithLogger sets where store errors are logged. Default: slog.Default().
func WithLogger(log *slog.Logger) Option { return func(h *Handler) { h.log = log } }

// ErrBadOption is returned by New for an option with a value it cannot use.
var ErrBadOption = errors.New("dashboard: bad option")

// New returns the dashboard over store. The store stays the caller's: the
// Handler never closes it.
func New(store quota.Store, opts ...Option) (*Handler, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrBadOption)
	}
	h := &Handler{store: store, loc: time.Local, refresh: 5 * time.Second, timeout: 10 * time.Second}
	for _, l := range quota.DefaultThresholds {
		h.levels = append(h.levels, int64(l))
	}
	for _, o := range opts {
		o(h)
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.loc == nil {
		return nil, fmt.Errorf("%w: nil location", ErrBadOption)
	}
	if h.refresh <= 0 {
		return nil, fmt.Errorf("%w: refresh %v must be > 0", ErrBadOption, h.refresh)
	}
	slices.Sort(h.levels)
	for _, l := range h.levels {
		if l <= 0 || l > 100 {
			return nil, fmt.Errorf("%w: threshold %d%% must be in 1..100", ErrBadOption, l)
		}
	}
	h.levels = slices.Compact(h.levels)
	vopts := []view.Option{view.WithLocation(h.loc)}
	if h.clock != nil {
		vopts = append(vopts, view.WithClock(h.clock))
	}
	h.reader = view.New(store, vopts...)
	page, err := template.New("page").Funcs(funcs).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard: templates: %w", err)
	}
	h.page = page

	static, err := fs.Sub(assets, "assets/static")
	if err != nil {
		return nil, fmt.Errorf("dashboard: assets: %w", err)
	}
	reg := prometheus.NewRegistry()
	var copts []promquota.StoreOption
	if h.clock != nil {
		copts = append(copts, promquota.WithStoreClock(h.clock))
	}
	if err := reg.Register(promquota.NewStoreCollector(store, copts...)); err != nil {
		return nil, fmt.Errorf("dashboard: metrics: %w", err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.servePage)
	mux.HandleFunc("GET /fragment", h.serveFragment)
	mux.HandleFunc("GET /events", h.serveEvents)
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("GET /api/snapshot", h.apiSnapshot)
	mux.HandleFunc("GET /api/status", h.apiPart(func(s *Snapshot) any { return s.Status }))
	mux.HandleFunc("GET /api/history", h.apiPart(func(s *Snapshot) any { return s.History }))
	mux.HandleFunc("GET /api/jobs", h.apiPart(func(s *Snapshot) any { return s.Jobs }))
	mux.HandleFunc("GET /api/thresholds", h.apiPart(func(s *Snapshot) any { return s.Thresholds }))
	mux.HandleFunc("GET /api/jobs/{name}", h.apiJob)
	mux.HandleFunc("GET /login", h.serveLogin)
	mux.HandleFunc("POST /login", h.postLogin)
	h.mux = mux
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	if h.token != "" && r.URL.Path != "/login" && !strings.HasPrefix(r.URL.Path, "/assets/") && !h.authorized(r) {
		if r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/html") {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		hd.Set("WWW-Authenticate", `Bearer realm="quotactl"`)
		http.Error(w, "dashboard: a token is required (Authorization: Bearer TOKEN)", http.StatusUnauthorized)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// sessionCookie is the cookie the login form sets.
const sessionCookie = "quotactl_session"

// session is the cookie value for a logged-in browser: a keyed hash of the
// token, so the cookie never holds the token itself.
func (h *Handler) session() string {
	m := hmac.New(sha256.New, []byte(h.token))
	m.Write([]byte("quotactl dashboard session v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// equal compares two secrets in constant time (whatever their lengths).
var equal = bearer.Equal

func (h *Handler) authorized(r *http.Request) bool {
	if r.Header.Get("Authorization") != "" {
		return bearer.Check(r.Header, "Authorization", h.token)
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		return equal(c.Value, h.session())
	}
	return false
}

func (h *Handler) serveLogin(w http.ResponseWriter, r *http.Request) {
	h.render(w, http.StatusOK, "login.html", loginView{Needed: h.token != ""})
}

func (h *Handler) postLogin(w http.ResponseWriter, r *http.Request) {
	if h.token == "" {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if err := r.ParseForm(); err != nil || !equal(r.PostForm.Get("token"), h.token) {
		h.render(w, http.StatusUnauthorized, "login.html", loginView{Needed: true, Wrong: true})
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: h.session(), Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil,
	})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

type loginView struct{ Needed, Wrong bool }

func (h *Handler) now() time.Time { return h.reader.Now() }

// snapshot reads the store, bounded by the handler's timeout.
func (h *Handler) snapshot(ctx context.Context) (*Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	s, err := h.read(ctx)
	if err != nil {
		h.log.Error("dashboard: reading the store", "err", err)
	}
	return s, err
}

func (h *Handler) storeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	if errors.Is(err, quota.ErrStoreUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		code = http.StatusServiceUnavailable
	}
	http.Error(w, err.Error(), code)
}

func (h *Handler) writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		h.log.Error("dashboard: writing JSON", "err", err)
	}
}

func (h *Handler) apiSnapshot(w http.ResponseWriter, r *http.Request) {
	s, err := h.snapshot(r.Context())
	if err != nil {
		h.storeError(w, err)
		return
	}
	h.writeJSON(w, s)
}

func (h *Handler) apiPart(part func(*Snapshot) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := h.snapshot(r.Context())
		if err != nil {
			h.storeError(w, err)
			return
		}
		h.writeJSON(w, part(s))
	}
}

func (h *Handler) apiJob(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := backend.CheckName("job", name); err != nil {
		http.Error(w, "dashboard: "+err.Error(), http.StatusBadRequest)
		return
	}
	s, err := h.snapshot(r.Context())
	if err != nil {
		h.storeError(w, err)
		return
	}
	for _, j := range s.Jobs {
		if j.Job == name {
			h.writeJSON(w, j)
			return
		}
	}
	http.Error(w, fmt.Sprintf("dashboard: no runs of job %q in the store", name), http.StatusNotFound)
}

// render executes a template into a buffer first, so a failure is a clean
// 500 rather than half a page.
func (h *Handler) render(w http.ResponseWriter, code int, name string, data any) {
	var buf bytes.Buffer
	if err := h.page.ExecuteTemplate(&buf, name, data); err != nil {
		h.log.Error("dashboard: rendering", "template", name, "err", err)
		http.Error(w, "dashboard: rendering failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

func (h *Handler) servePage(w http.ResponseWriter, r *http.Request) {
	s, err := h.snapshot(r.Context())
	if err != nil {
		h.render(w, http.StatusServiceUnavailable, "page.html", pageView{Error: err.Error(), Refresh: h.refresh.Milliseconds()})
		return
	}
	h.render(w, http.StatusOK, "page.html", pageView{Main: h.view(s), Refresh: h.refresh.Milliseconds()})
}

// fragment renders the page's live part, reusing a rendering younger than
// half the refresh interval: each open page asks once per interval, and the
// store is read once for all of them.
func (h *Handler) fragment(ctx context.Context) ([]byte, error) {
	h.liveMu.Lock()
	defer h.liveMu.Unlock()
	if h.live != nil && time.Since(h.liveRead) < h.refresh/2 {
		return h.live, nil
	}
	b, err := h.renderLive(ctx)
	if err != nil {
		return nil, err
	}
	h.live, h.liveRead = b, time.Now()
	return b, nil
}

func (h *Handler) renderLive(ctx context.Context) ([]byte, error) {
	s, err := h.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := h.page.ExecuteTemplate(&buf, "main", h.view(s)); err != nil {
		return nil, fmt.Errorf("dashboard: rendering: %w", err)
	}
	return buf.Bytes(), nil
}

// serveFragment serves the page's live part alone: for clients that poll
// instead of listening to /events.
func (h *Handler) serveFragment(w http.ResponseWriter, r *http.Request) {
	b, err := h.fragment(r.Context())
	if err != nil {
		h.storeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b)
}

// serveEvents streams the page's live part as server-sent events: a "main"
// event with the HTML whenever it changes, a "same" event when a refresh
// found nothing new, and a "down" event when the store could not be read.
func (h *Handler) serveEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	ctx := r.Context()
	tick := time.NewTicker(h.refresh)
	defer tick.Stop()
	var last []byte
	for {
		b, err := h.fragment(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			fmt.Fprintf(w, "event: down\ndata: the store could not be read\n\n")
		case bytes.Equal(b, last):
			fmt.Fprintf(w, "event: same\ndata: %d\n\n", h.now().Unix())
		default:
			last = b
			fmt.Fprintf(w, "retry: %d\nevent: main\n", h.refresh.Milliseconds())
			for line := range bytes.Lines(b) {
				fmt.Fprintf(w, "data: %s\n", bytes.TrimRight(line, "\r\n"))
			}
			fmt.Fprint(w, "\n")
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
