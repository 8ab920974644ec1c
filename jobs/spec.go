package jobs

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/robfig/cron/v3"

	"github.com/quotactl/quotactl/quota"
)

// specParser reads standard 5-field specs, an optional leading seconds field,
// descriptors (@hourly, @every 15m) and CRON_TZ=/TZ= prefixes.
var specParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseSpec parses a cron spec as Scheduler.Add reads it, and returns an
// error wrapping quota.ErrInvalid and naming the spec for any spec it cannot
// read. It never panics: robfig/cron v3 panics on a CRON_TZ= or TZ= prefix
// with nothing after it (upstream issue #554), so the zone prefix is read
// here, and any other panic in the parser is turned into an error.
func parseSpec(spec string) (cron.Schedule, error) {
	sched, err := readSpec(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: schedule %q: %w", quota.ErrInvalid, spec, err)
	}
	return sched, nil
}

func readSpec(spec string) (sched cron.Schedule, err error) {
	defer func() {
		if v := recover(); v != nil {
			sched, err = nil, fmt.Errorf("cron parser: %v", v)
		}
	}()
	s := strings.TrimSpace(spec)
	if s == "" {
		return nil, fmt.Errorf("empty")
	}
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		if !strings.HasPrefix(s, prefix) {
			continue
		}
		rest := s[len(prefix):]
		i := strings.IndexFunc(rest, unicode.IsSpace)
		if i < 0 {
			return nil, fmt.Errorf("time zone %q with no schedule after it", rest)
		}
		zone, body := rest[:i], strings.TrimSpace(rest[i:])
		if zone == "" {
			return nil, fmt.Errorf("%s with no time zone", prefix)
		}
		if _, err := time.LoadLocation(zone); err != nil {
			return nil, fmt.Errorf("time zone %q: %w", zone, err)
		}
		if body == "" {
			return nil, fmt.Errorf("time zone %q with no schedule after it", zone)
		}
		if strings.HasPrefix(body, "CRON_TZ=") || strings.HasPrefix(body, "TZ=") {
			return nil, fmt.Errorf("two time zone prefixes")
		}
		// One plain space: the parser splits the prefix at the first ' '.
		s = "CRON_TZ=" + zone + " " + body
		break
	}
	// robfig/cron reads "@every D" with any D and runs a D under one second
	// (zero and negative ones included) every second.
	body := s
	if strings.HasPrefix(body, "CRON_TZ=") {
		_, body, _ = strings.Cut(body, " ")
	}
	if d, ok := strings.CutPrefix(body, "@every "); ok {
		if every, err := time.ParseDuration(strings.TrimSpace(d)); err == nil && every < time.Second {
			return nil, fmt.Errorf("@every %v: the interval must be at least 1s", every)
		}
	}
	return specParser.Parse(s)
}
