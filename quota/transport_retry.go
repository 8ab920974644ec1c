package quota

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// attempt is the state of one request across its attempts.
type attempt struct {
	t    *Transport
	req  *http.Request
	ctx  context.Context
	cred Credential
	est  Estimate // the call's price: its Charge, and how it settles (a BodyPricer's)
	// trued is the last response's reports, one per budget (tightest), that
	// report trued the store up to; a refund trues up to them again.
	trued []Report
}

func (t *Transport) roundTrip(req *http.Request, cred Credential, est Estimate) (*http.Response, error) {
	ch := est.Charge
	a := &attempt{t: t, req: req, ctx: t.context(req), cred: cred, est: est}
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	var (
		bo    backoff.BackOff
		start time.Time
	)
	for n := 1; ; n++ {
		areq := req
		if n > 1 {
			areq = req.Clone(a.ctx)
			if req.GetBody != nil {
				body, err := req.GetBody()
				if err != nil {
					return nil, a.errorf("replay body: %w", err)
				}
				areq.Body = body
			}
		}
		res, err := t.take(a.ctx, cred, ch)
		if err != nil {
			closeBody(areq)
			return nil, a.errorf("%w", err)
		}
		t.metered(a.ctx, res)
		if err := a.ctx.Err(); err != nil {
			a.refund(res)
			closeBody(areq)
			return nil, a.errorf("not sent: %w", err)
		}
		var fid uint64
		if t.flying != nil {
			fid = t.flying.add(res.At)
		}
		resp, sent, err := a.send(areq)
		if t.flying != nil {
			t.flying.done(fid)
		}
		var wait time.Duration
		if err != nil {
			if !sent {
				a.refund(res)
			}
			if !transientError(err) || !replayable || a.ctx.Err() != nil {
				return nil, a.errorf("%w", err)
			}
		} else {
			retry, ra, err := a.judge(resp, res)
			if err != nil {
				return nil, err
			}
			if !retry || !replayable {
				return a.settling(resp, res), nil
			}
			wait = ra
		}
		// A retry is in order: bounded by attempts and elapsed time.
		if n >= t.maxAttempts {
			return a.giveUp(resp, err)
		}
		if bo == nil {
			bo, start = t.newBackOff(), t.clock.Now()
		}
		next := bo.NextBackOff()
		if next == backoff.Stop {
			return a.giveUp(resp, err)
		}
		wait = max(wait, next)
		if t.clock.Now().Sub(start)+wait > t.maxElapsed {
			return a.giveUp(resp, err)
		}
		status := 0
		if resp != nil {
			status = resp.StatusCode
			drain(resp)
		}
		t.log.LogAttrs(a.ctx, slog.LevelDebug, "quota: transport: retrying",
			slog.String("api", t.limiter.api), slog.String("method", ch.Method), slog.Any("credential", cred),
			slog.Int("attempt", n), slog.Int("status", status), slog.Duration("wait", wait), slog.String("error", a.scrub(errString(err))))
		if err := a.sleep(wait); err != nil {
			return nil, a.errorf("retry: %w", err)
		}
	}
}

// giveUp returns the last attempt's outcome once retries run out.
func (a *attempt) giveUp(resp *http.Response, err error) (*http.Response, error) {
	if err != nil {
		return nil, a.errorf("%w", err)
	}
	return resp, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// send sends one attempt and reports whether it reached the upstream. With
// an *http.Transport base, httptrace says whether request headers were
// written; http.Transport retries some failed requests on its own, and each
// extra write is charged too, as the upstream may have billed it.
func (a *attempt) send(req *http.Request) (*http.Response, bool, error) {
	if !a.t.traced {
		resp, err := a.t.base.RoundTrip(req)
		return resp, err == nil || !unreached(err), err
	}
	var writes atomic.Int32
	trace := &httptrace.ClientTrace{WroteHeaders: func() { writes.Add(1) }}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := a.t.base.RoundTrip(req)
	n := int(writes.Load())
	for i := 1; i < n; i++ {
		if _, terr := a.t.limiter.Take(context.WithoutCancel(a.ctx), a.cred, a.est.Charge); terr != nil {
			a.t.log.LogAttrs(a.ctx, slog.LevelWarn, "quota: transport: the base transport resent a request that could not be metered",
				slog.String("api", a.t.limiter.api), slog.String("method", a.est.Charge.Method), slog.Any("credential", a.cred),
				slog.String("error", a.scrub(terr.Error())))
		}
	}
	return resp, n > 0 || err == nil, err
}

// judge reads a response: whether to retry it (and the Retry-After to
// honour), or an error replacing it when the upstream says a budget is spent.
func (a *attempt) judge(resp *http.Response, res *Reservation) (retry bool, wait time.Duration, err error) {
	if resp.StatusCode < 400 {
		var body []byte
		if a.est.Peek {
			body = peekBody(resp)
		}
		a.report(resp, res, body)
		if a.est.Peek && a.t.classifier != nil {
			if v := a.t.classifier.Classify(a.req, resp, body); len(v.Exhausted) > 0 {
				drain(resp)
				return false, 0, a.exhausted(res, v, resp.StatusCode)
			}
		}
		return false, 0, nil
	}
	var body []byte
	if a.t.classifier != nil || a.t.reporter != nil {
		body = peekBody(resp)
	}
	a.report(resp, res, body)
	var v Verdict
	if a.t.classifier != nil {
		v = a.t.classifier.Classify(a.req, resp, body)
	}
	ra, hasRA := retryAfter(resp, a.t.clock.Now())
	short := hasRA && ra <= a.t.maxRetryAfter
	code := resp.StatusCode
	switch {
	case len(v.Hold) > 0:
		drain(resp)
		return false, 0, a.hold(res, v, code)
	case len(v.Exhausted) > 0:
		drain(resp)
		return false, 0, a.exhausted(res, v, code)
	case hasRA && !short:
		return false, 0, nil // the upstream asks for a longer wait than we make
	case code == http.StatusTooManyRequests || code == 500 || code == 502 || code == 503 || code == 504 || v.Transient:
		return true, ra, nil
	}
	return false, 0, nil
}

// exhausted marks the budgets the upstream says are spent until their next
// reset, refunds the refused attempt and returns the error for the caller.
func (a *attempt) exhausted(res *Reservation, v Verdict, status int) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), 10*time.Second)
	defer cancel()
	var first *ExhaustedError
	for _, name := range v.Exhausted {
		b, ok := a.t.budgets[name]
		if !ok {
			a.t.log.LogAttrs(a.ctx, slog.LevelWarn, "quota: transport: classifier named an unknown budget",
				slog.String("api", a.t.limiter.api), slog.String("budget", name))
			continue
		}
		// the definition in force: an operator's override (quotactl budget
		// set: another zone, window or limit) resets when it says
		// and the owner's limit (set, or learned from this very response)
		b = a.t.limiter.ownerBudgetOf(a.t.limiter.def(b), res.account())
		now := res.At
		if now.IsZero() {
			now = time.Now()
		}
		until := b.Window.NextReset(now)
		if until.IsZero() {
			until = now.Add(b.Window.Duration())
		}
		if v.Until.IsZero() && v.RetryAfter > 0 {
			v.Until = now.Add(v.RetryAfter)
		}
		if v.Until.After(now) && v.Until.Before(until) {
			until = v.Until // the upstream resets sooner (Verdict.Until)
		}
		a.markSpent(ctx, name, until)
		e := &ExhaustedError{
			API: a.t.limiter.api, Budget: name, Credential: res.Label, Limit: b.Limit,
			RetryAfter: until.Sub(now), RetryAt: until, ExhaustedUntil: until,
		}
		if e.Credential == "" {
			e.Credential = res.Credential
		}
		for _, u := range res.Usage {
			if u.Budget == name {
				e.Used, e.Cost = u.Used-u.Cost, u.Cost
			}
		}
		if first == nil {
			first = e
		}
		a.t.log.LogAttrs(a.ctx, slog.LevelWarn, "quota: transport: upstream says the budget is spent",
			slog.String("api", a.t.limiter.api), slog.String("budget", name), slog.Any("credential", a.cred),
			slog.String("method", a.est.Charge.Method), slog.Int("status", status), slog.String("reason", v.Reason),
			slog.Time("until", until))
	}
	a.refund(res)                // the upstream refused the call: it did not bill it
	a.trueUpAgain(ctx, res, nil) // nor did its reports count it
	if first == nil {
		return a.errorf("upstream answered %d %s naming no known budget", status, v.Reason)
	}
	return a.errorf("upstream answered %d %s: %w", status, v.Reason, first)
}

// markSpent marks budget name of the attempt's credential spent until
// until (Limiter.Exhaust); a store that fails is logged, not returned: the
// call's answer stands either way.
func (a *attempt) markSpent(ctx context.Context, name string, until time.Time) {
	if err := a.t.limiter.Exhaust(ctx, a.cred, name, until); err != nil {
		a.t.log.LogAttrs(a.ctx, slog.LevelWarn, "quota: transport: could not mark budget spent",
			slog.String("api", a.t.limiter.api), slog.String("budget", name), slog.Any("credential", a.cred),
			slog.String("error", a.scrub(err.Error())))
	}
}

// refund gives back an attempt's charge, even when the request's context is
// done.
func (a *attempt) refund(res *Reservation) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), 10*time.Second)
	defer cancel()
	if err := a.t.limiter.Refund(ctx, res); err != nil {
		a.t.log.LogAttrs(a.ctx, slog.LevelWarn, "quota: transport: refund failed",
			slog.String("api", a.t.limiter.api), slog.String("method", a.est.Charge.Method), slog.Any("credential", a.cred),
			slog.String("error", a.scrub(err.Error())))
	}
}

// sleep waits d on the Transport's timer, or until the context is done.
func (a *attempt) sleep(d time.Duration) error {
	timer := a.t.newTimer()
	timer.Start(d)
	defer timer.Stop()
	select {
	case <-timer.C():
		return nil
	case <-a.ctx.Done():
		return a.ctx.Err()
	}
}

// errorf returns a Transport error naming the method, with the credential's
// secret scrubbed from its text (errors.Is and errors.As still see the
// wrapped errors).
func (a *attempt) errorf(format string, args ...any) error {
	return scrubbed(fmt.Errorf("quota: transport: "+a.est.Charge.Method+": "+format, args...), a.cred.Secret)
}

// scrubbed returns err, its text without secret when it holds it.
func scrubbed(err error, secret string) error {
	if secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return &scrubbedError{msg: strings.ReplaceAll(err.Error(), secret, "<redacted>"), err: err}
}

func (a *attempt) scrub(s string) string {
	if a.cred.Secret == "" {
		return s
	}
	return strings.ReplaceAll(s, a.cred.Secret, "<redacted>")
}

// scrubbedError is an error whose text had a secret removed.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// unreached reports whether err says the request never left: a failed dial
// or name lookup.
func unreached(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// transientError reports whether a failed attempt is worth retrying: the
// connection broke (reset, closed mid-exchange) or timed out on its own.
func transientError(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(resp *http.Response, now time.Time) (time.Duration, bool) {
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	v = strings.TrimSpace(v)
	if v != "" && strings.Trim(v, "0123456789") == "" {
		// delay-seconds: a non-negative integer. One that overflows a
		// Duration (18446744074 s) is "wait longer than we ever would".
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil || s > int64(maxRetryAfterSeconds) {
			return maxDuration, true
		}
		return time.Duration(s) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

const (
	maxDuration          = time.Duration(1<<63 - 1)
	maxRetryAfterSeconds = maxDuration / time.Second
)

// peekBody reads up to maxErrorBody bytes of an error response and puts
// them back in front of the rest of the body.
func peekBody(resp *http.Response) []byte {
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	buf, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	rest := io.Reader(resp.Body)
	if err != nil {
		rest = errReader{err}
	}
	resp.Body = &peekedBody{Reader: io.MultiReader(bytes.NewReader(buf), rest), Closer: resp.Body}
	return buf
}

type peekedBody struct {
	io.Reader
	io.Closer
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// drain reads a little of a response body and closes it, so the
// connection can be reused.
func drain(resp *http.Response) {
	if resp.Body != nil {
		_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
		_ = resp.Body.Close()
	}
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
