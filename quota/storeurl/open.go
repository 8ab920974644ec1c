package storeurl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// DefaultOpenTimeout is how long Open waits, by default, for a Redis form's
// server (and Sentinels) to answer its checks: ?open_timeout= changes it.
const DefaultOpenTimeout = 5 * time.Second

// ErrUnknownMaster is wrapped by Open's error for a redis+sentinel:// URL
// whose master name no Sentinel that answered monitors. The error also
// wraps quota.ErrStoreUnavailable, and names the master, the Sentinels that
// answered with the masters they monitor, and those that did not answer.
var ErrUnknownMaster = errors.New("unknown master")

// Open opens the store s describes. See the package Open.
func (s *Spec) Open(ctx context.Context) (quota.Store, error) {
	switch s.Kind {
	case Memory:
		return quota.NewMemoryStore(), nil
	case SQLite:
		return openSQLite(s, false)
	case Redis, Sentinel, Cluster:
		return s.openRedis(ctx)
	}
	return nil, &Error{URL: s.String(), Reason: "unknown kind " + string(s.Kind)}
}

// OpenReadOnly opens the store s describes for inspection only. See the
// package OpenReadOnly.
func (s *Spec) OpenReadOnly(ctx context.Context) (quota.Store, error) {
	if s.Kind == SQLite {
		return openSQLite(s, true)
	}
	return s.Open(ctx)
}

// client makes the go-redis client for a Redis form.
func (s *Spec) client() (redis.UniversalClient, error) {
	// NewUniversalClient would pick the same clients, but only from
	// UniversalOptions: converting the options go-redis parsed for each form
	// into those would drop some, and a one-seed cluster would come out as a
	// plain client. So each form makes its own client directly.
	switch {
	case s.simple != nil:
		o := *s.simple
		return redis.NewClient(&o), nil
	case s.failover != nil:
		o := *s.failover
		return redis.NewFailoverClient(&o), nil
	case s.cluster != nil:
		o := *s.cluster
		return redis.NewClusterClient(&o), nil
	}
	return nil, &Error{URL: s.String(), Reason: "not parsed: use Parse"}
}

// openTimeout is the URL's open_timeout, else the default.
func (s *Spec) openTimeout() time.Duration {
	if s.OpenTimeout > 0 {
		return s.OpenTimeout
	}
	return DefaultOpenTimeout
}

// openRedis opens a Redis form: for Sentinel, it first asks the Sentinels
// for the master itself, so that a wrong master name or unreachable
// Sentinels are said as such at once; then it checks that the server
// answers and its eviction policy. All of it within open_timeout: the
// client's own retries (dial attempts within command retries within
// Sentinel lookups) could otherwise take minutes to give up.
func (s *Spec) openRedis(ctx context.Context) (quota.Store, error) {
	limit := s.openTimeout()
	octx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	// unavailable is the error for a check that failed: the cause as text,
	// scrubbed of passwords, not a wrapped go-redis error
	unavailable := func(cause string) error {
		return fmt.Errorf("storeurl: %s: %w: %s", s.String(), quota.ErrStoreUnavailable, s.scrub(cause))
	}
	what := ""
	if s.Kind == Sentinel {
		addr, err := s.findMaster(octx, limit)
		if errors.Is(err, ErrUnknownMaster) {
			return nil, fmt.Errorf("storeurl: %s: %w: %w", s.String(), quota.ErrStoreUnavailable, err)
		}
		if err != nil {
			return nil, unavailable(err.Error()) // it says why, Sentinel by Sentinel
		}
		what = fmt.Sprintf("master %q at %s: ", s.Master, addr)
	}
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	var st quota.Store
	err = bounded(octx, func() error {
		if err := c.Ping(octx).Err(); err != nil {
			return err
		}
		var err error
		st, err = newRedisStore(octx, c, s)
		return err
	})
	if err == nil {
		return st, nil
	}
	_ = c.Close()
	switch {
	case errors.Is(err, redisstore.ErrUnsafeConfig) || errors.Is(err, quota.ErrInvalid):
		return nil, fmt.Errorf("storeurl: %s: %w", s.String(), err)
	case expired(octx) && !expired(ctx):
		// go-redis then says little ("context deadline exceeded", "i/o
		// timeout"): say which bound ran out
		return nil, unavailable(fmt.Sprintf("%sno answer within %v (open_timeout)", what, limit))
	}
	return nil, unavailable(what + err.Error())
}

// scrub hides the URL's passwords in msg.
func (s *Spec) scrub(msg string) string { return scrub(msg, []string{s.password, s.sentinelPassword}) }

// bounded runs f and waits for it until ctx ends: the go-redis clients Open
// makes do not apply ctx's deadline to their reads (ContextTimeoutEnabled
// is the URL's choice), so a server that accepts connections and answers
// nothing would hold f for the client's own timeouts, retried. An f left
// behind ends when the client is closed or its timeouts run out.
func bounded(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sentinelAnswer is what one Sentinel said of the URL's master.
type sentinelAnswer struct {
	addr   string
	master string   // the master's host:port, when it knows it
	knows  []string // else the masters it monitors, when listed
	listed bool
	err    error // it did not answer, or refused
}

// findMaster asks every Sentinel at once for the address of the URL's
// master, each with one connection attempt and no retries, and returns the
// first address given. When none gives one, the error says why: no
// Sentinel that answered monitors that name (wrapping ErrUnknownMaster,
// with the masters they do monitor), or none answered (each with its
// reason; limit is ctx's bound, named when a Sentinel held out until it).
func (s *Spec) findMaster(ctx context.Context, limit time.Duration) (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make(chan sentinelAnswer, len(s.Addrs))
	for _, addr := range s.Addrs {
		go func() { answers <- s.askSentinel(ctx, addr) }()
	}
	got := map[string]sentinelAnswer{}
	for range s.Addrs {
		a := <-answers
		if a.master != "" {
			return a.master, nil
		}
		got[a.addr] = a
	}
	var knew, failed []string
	for _, addr := range s.Addrs { // in the URL's order
		a := got[addr]
		switch {
		case a.err == nil && !a.listed:
			knew = append(knew, addr+" answered")
		case a.err == nil && len(a.knows) == 0:
			knew = append(knew, addr+" monitors no master")
		case a.err == nil:
			k := fmt.Sprintf("%q", a.knows)
			knew = append(knew, addr+" monitors "+k[1:len(k)-1])
		case errors.Is(a.err, context.DeadlineExceeded) || isTimeout(a.err) && expired(ctx):
			failed = append(failed, fmt.Sprintf("%s: no answer within %v (open_timeout)", addr, limit))
		default:
			failed = append(failed, addr+": "+strings.TrimSpace(a.err.Error()))
		}
	}
	if len(knew) > 0 {
		return "", fmt.Errorf("%w %q: no Sentinel that answered monitors it (%s); check the master name in the URL",
			ErrUnknownMaster, s.Master, s.scrub(strings.Join(append(knew, failed...), "; ")))
	}
	return "", fmt.Errorf("cannot ask the Sentinels for master %q: %s", s.Master, strings.Join(failed, "; "))
}

// expired reports whether ctx's deadline has passed (a socket deadline set
// from it may fire before ctx says so).
func expired(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(d)
}

// isTimeout reports whether err is a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// askSentinel asks the Sentinel at addr for the URL's master: one
// connection attempt, no retries, its reads bound by ctx.
func (s *Spec) askSentinel(ctx context.Context, addr string) sentinelAnswer {
	f := s.failover
	c := redis.NewSentinelClient(&redis.Options{
		Addr: addr, Username: f.SentinelUsername, Password: f.SentinelPassword, TLSConfig: f.TLSConfig,
		Dialer: f.Dialer, ClientName: f.ClientName, Protocol: f.Protocol,
		DialTimeout: f.DialTimeout, ReadTimeout: f.ReadTimeout, WriteTimeout: f.WriteTimeout,
		MaxRetries: -1, DialerRetries: 1, PoolSize: 1, ContextTimeoutEnabled: true,
	})
	defer c.Close()
	a := sentinelAnswer{addr: addr}
	hp, err := c.GetMasterAddrByName(ctx, s.Master).Result()
	switch {
	case err == nil && len(hp) == 2:
		a.master = net.JoinHostPort(hp[0], hp[1])
	case errors.Is(err, redis.Nil):
		// it monitors no master by that name: which does it?
		cmd := redis.NewMapStringStringSliceCmd(ctx, "sentinel", "masters")
		if a.listed = c.Process(ctx, cmd) == nil; a.listed {
			for _, m := range cmd.Val() {
				if m["name"] != "" {
					a.knows = append(a.knows, m["name"])
				}
			}
			slices.Sort(a.knows)
		}
	case err == nil:
		a.err = fmt.Errorf("unexpected reply %q to SENTINEL GET-MASTER-ADDR-BY-NAME", hp)
	default:
		a.err = err
	}
	return a
}
