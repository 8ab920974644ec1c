package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// markdown writes the report as the markdown BENCHMARKS.md records.
func (rep *report) markdown(w io.Writer, redisDesc string) error {
	b := bufio.NewWriter(w)
	m := rep.machine
	fmt.Fprintf(b, "### Machine\n\n")
	fmt.Fprintf(b, "- CPU: %s, nproc %d, %s\n", m.cpu, m.nproc, m.osArch)
	fmt.Fprintf(b, "- Go: %s; Redis: %s (%s)\n", m.goVersion, m.redisVersion, redisDesc)
	fmt.Fprintf(b, "- Load average (1, 5, 15 min) before: %s; after: %s\n", m.loadBefore, m.loadAfter)
	fmt.Fprintf(b, "- Run: %s, took %s", m.when.Format(time.RFC3339), rep.elapsed.Round(time.Second))
	if rep.command != "" {
		fmt.Fprintf(b, ": `%s`", rep.command)
	}
	fmt.Fprintf(b, "\n\n")

	if len(rep.fleet) > 0 {
		fmt.Fprintf(b, "### A fleet of single-threaded processes\n\n")
		fmt.Fprintf(b, "N processes of one goroutine each (this binary run again as children), every one charging one owner, closed loop: "+
			"each decision is alone, no batch forms. Budgets never run out: quota daily, quota sliding over 1 h (redisstore as New makes it), "+
			"redis_rate at 1e6 decisions/s over 1 h, and the no-op EVALSHA; %d interleaved rounds of %s (after a %s warm-up in each process), "+
			"each cell the median round's decisions/s of all processes together, \"(0.50x)\" against the no-op at the same N. "+
			"Redis µs per decision: INFO commandstats (EVALSHA usec) from the common start until every process ended, over the decisions made. "+
			"The last column is quota daily with WithLeases (adaptive blocks): each process takes units in blocks and decides locally, "+
			"so its decisions are not alone in Redis; what a fleet can use instead of a store call per decision.\n\n",
			rep.cfg.rounds, rep.cfg.dur, rep.cfg.warmup)
		fleetTable(b, rep.fleet, rep.fleetSQLite)
		fmt.Fprintf(b, "\n")
	}
	if rep.cfg.fleetOnly {
		return b.Flush()
	}

	fmt.Fprintf(b, "### Decisions per second, Redis limiters\n\n")
	fmt.Fprintf(b, "Closed loop: each goroutine starts its next decision when the last returns; all goroutines charge one key (one credential). "+
		"Limits are set so no decision is refused; the %s window keeps the state bounded, so each admission also expires about one old entry (or, for the per-unit log, `cost` old members). "+
		"Each measurement runs %d interleaved rounds of %s (after a %s warm-up each); Decisions/s is the median round's, p50/p99 are over every decision of every round. "+
		"\"vs ceiling\" is decisions/s divided by the no-op EVALSHA's at the same goroutine count. "+
		"\"Redis µs/decision\" is the time Redis itself spent executing the decisions' scripts (INFO commandstats, EVALSHA usec over decisions): "+
		"it excludes the network and the client, so a loaded host disturbs it far less than decisions/s. "+
		"\"Client CPU µs/decision\" is the bench process's own CPU time (user+system, getrusage) over decisions: the limiter's Go side, go-redis, the runtime and the timing.\n\n", rep.cfg.window, rep.cfg.rounds, rep.cfg.dur, rep.cfg.warmup)
	decisionsTable(b, rep.decisions)

	fmt.Fprintf(b, "\n### Refuse-heavy phase: a spent daily budget\n\n")
	fmt.Fprintf(b, "Every goroutine charges one credential whose daily budget (100 units) was spent before the measurement, so every decision is a refusal (column Refused = all of them); "+
		"redis_rate's bucket (100 a day) likewise. Same rounds as above; \"vs ceiling\" is against the no-op EVALSHA measured in the same rounds.\n\n")
	decisionsTable(b, rep.refuse)

	fmt.Fprintf(b, "\n### Decisions per second, in-process quota stores\n\n")
	fmt.Fprintf(b, "Same Limiter.Take, same budget and window; \"vs ceiling\" is against the Redis no-op EVALSHA at the same goroutine count.\n\n")
	decisionsTable(b, rep.local)

	fmt.Fprintf(b, "\n### quota decision latency by entries in the window (redisstore, 1 goroutine)\n\n")
	n := 0
	if len(rep.window) > 0 {
		n = int(rep.window[0].s.ops)
	}
	fmt.Fprintf(b, "A budget of FILL+%d units over a 24h sliding window, pre-filled with FILL entries of 1 unit; then %d admitted decisions of 1 unit, "+
		"then %d more that the full window refuses; each phase in %d rounds alternating between the fills. "+
		"Decisions/s is the median round's; \"vs ceiling\" is against the no-op EVALSHA at 1 goroutine.\n\n", n, n, n, rep.cfg.rounds)
	fmt.Fprintf(b, "| Window | Outcome | Decisions | Decisions/s | vs ceiling | p50 | p99 | Redis µs/decision | Client CPU µs/decision |\n")
	fmt.Fprintf(b, "|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rep.window {
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", strings.TrimPrefix(r.name, "quota redisstore Take, "), r.algo,
			r.s.ops, thousands(r.s.perSecond()), ratio(r.s, r.ceiling), latency(r.s.percentile(50)), latency(r.s.percentile(99)),
			serverTime(r.s), perDecision(r.s.clientPerDecision()))
	}

	fmt.Fprintf(b, "\n### Redis memory after a saturated YouTube day\n\n")
	fmt.Fprintf(b, "One credential, %d calls of %d units against a %s-unit daily limit, then one more call (refused by an exact limiter). "+
		"Bytes are `MEMORY USAGE key SAMPLES 0` (exact) summed over the keys the limiter keeps for the credential.\n\n", dayCalls, dayCost, thousands(dayLimit))
	fmt.Fprintf(b, "| Limiter | State | Keys | Log members | Bytes | vs quota | Admitted of %d |\n", dayCalls+1)
	fmt.Fprintf(b, "|---|---|---:|---:|---:|---:|---:|\n")
	var base int64
	if len(rep.memory) > 0 {
		base = rep.memory[0].bytes
	}
	for _, r := range rep.memory {
		members, adm, vs := "—", "—", "—"
		if r.entries > 0 {
			members = thousands(float64(r.entries))
		}
		if !strings.Contains(r.name, "catalog") {
			adm = strconv.Itoa(r.admitted)
			if base > 0 {
				vs = fmt.Sprintf("%.2f×", float64(r.bytes)/float64(base))
			}
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %s |\n", r.name, r.state, r.keys, members, thousands(float64(r.bytes)), vs, adm)
	}
	return b.Flush()
}

func decisionsTable(b io.Writer, rows []row) {
	fmt.Fprintf(b, "| Limiter | Algorithm | Cost | Goroutines | Decisions/s | vs ceiling | Rounds (min–max/s) | p50 | p99 | Redis µs/decision | Client CPU µs/decision | Refused |\n")
	fmt.Fprintf(b, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		cost := "—"
		if r.cost > 0 {
			cost = strconv.FormatInt(r.cost, 10)
		}
		spread := "—"
		if n := len(r.s.rates); n > 1 {
			spread = thousands(r.s.rates[0]) + "–" + thousands(r.s.rates[n-1])
		}
		fmt.Fprintf(b, "| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %d |\n", r.name, r.algo, cost, r.s.goroutines,
			thousands(r.s.perSecond()), ratio(r.s, r.ceiling), spread, latency(r.s.percentile(50)), latency(r.s.percentile(99)),
			serverTime(r.s), perDecision(r.s.clientPerDecision()), r.s.refused)
	}
}

// serverTime formats the µs Redis spent per decision, "—" when not measured.
func serverTime(s *sample) string { return perDecision(s.serverPerDecision()) }

// perDecision formats µs per decision, "—" when not measured (< 0).
func perDecision(us float64) string {
	if us < 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", us)
}

// ratio is s's decisions/s over the ceiling's.
func ratio(s, ceiling *sample) string {
	if ceiling == nil || ceiling.perSecond() == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", s.perSecond()/ceiling.perSecond())
}

// latency formats d in µs below a millisecond, else in ms.
func latency(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	}
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// thousands formats x rounded to an integer with comma separators.
func thousands(x float64) string {
	s := strconv.FormatInt(int64(x+0.5), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// cpuModel returns the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// loadavg returns the 1, 5 and 15 minute load averages from /proc/loadavg.
func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
