package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
)

// regions are fetched in this order, each run resuming where the last one
// stopped.
var regions = []string{"US", "GB", "DE", "FR", "IN", "BR", "AU", "CA"}

// trending is the ingestion job: for each region, every page of
// videos.list?chart=mostPopular, then one page of search.list, each item
// written as a JSON line. Every request goes through the metered client, so
// when the budget is spent the client refuses the next request without
// sending it and the job stops with quota.ErrExhausted.
type trending struct {
	client *http.Client // metered: quota.NewTransport
	base   string       // upstream base URL
	key    string       // API key, sent in the X-Goog-Api-Key header
	out    io.Writer    // JSON lines
	log    io.Writer    // progress, one line per region
	now    func() time.Time
	left   func(ctx context.Context) string // what is left of the budgets
}

// cursor is the job's checkpoint: the next request to make.
type cursor struct {
	Region string `json:"region"`               // region to fetch
	Page   int    `json:"page"`                 // mostPopular pages of it already fetched
	Token  string `json:"page_token,omitempty"` // the next page's token
	Search bool   `json:"search,omitempty"`     // mostPopular done: search.list next
}

func (c cursor) String() string {
	if c.Search {
		return c.Region + " search"
	}
	return fmt.Sprintf("%s page %d", c.Region, c.Page+1)
}

// item is one line of the output.
type item struct {
	FetchedAt time.Time `json:"fetched_at"`
	Region    string    `json:"region"`
	Source    string    `json:"source"` // "mostPopular" or "search"
	Rank      int       `json:"rank"`   // 1-based, within the region's list
	VideoID   string    `json:"video_id"`
	Title     string    `json:"title"`
	Channel   string    `json:"channel"`
	Views     int64     `json:"views,omitempty"`
}

// Run is the jobs.Func.
func (t *trending) Run(ctx context.Context, run *jobs.Run) error {
	c := cursor{Region: regions[0]}
	if found, err := run.Resume(ctx, &c); err != nil {
		return err
	} else if found {
		fmt.Fprintf(t.log, "resuming at %v\n", c)
	}
	start := indexOf(c.Region)
	if start < 0 {
		c, start = cursor{Region: regions[0]}, 0
	}
	for _, region := range regions[start:] {
		if c.Region != region {
			c = cursor{Region: region}
		}
		videos, results, err := t.region(ctx, run, &c)
		if err != nil {
			why := "stopped"
			if errors.Is(err, quota.ErrExhausted) {
				why = "out of budget"
			}
			if videos == 0 {
				fmt.Fprintf(t.log, "%-3s %s at %v: the next run resumes there\n", region, why, c)
			} else {
				fmt.Fprintf(t.log, "%-3s %3d trending videos, then %s: the next run resumes at %v\n", region, videos, why, c)
			}
			return err
		}
		fmt.Fprintf(t.log, "%-3s %3d trending videos, %d search results   left: %s\n", region, videos, results, t.left(ctx))
	}
	fmt.Fprintf(t.log, "all %d regions done; the next run starts over at %s\n", len(regions), regions[0])
	return run.Clear(ctx)
}

// region fetches what is left of c's region, saving c after each page. It
// returns the items it got.
func (t *trending) region(ctx context.Context, run *jobs.Run, c *cursor) (videos, results int, err error) {
	for !c.Search {
		var page struct {
			NextPageToken string `json:"nextPageToken"`
			Items         []struct {
				ID      string `json:"id"`
				Snippet struct {
					Title        string `json:"title"`
					ChannelTitle string `json:"channelTitle"`
				} `json:"snippet"`
				Statistics struct {
					ViewCount string `json:"viewCount"`
				} `json:"statistics"`
			} `json:"items"`
		}
		q := url.Values{"part": {"snippet,statistics"}, "chart": {"mostPopular"}, "regionCode": {c.Region}, "maxResults": {"50"}}
		if c.Token != "" {
			q.Set("pageToken", c.Token)
		}
		if err := t.get(ctx, "videos", q, &page); err != nil {
			return videos, 0, err
		}
		for i, v := range page.Items {
			views, _ := strconv.ParseInt(v.Statistics.ViewCount, 10, 64)
			if err := t.write(item{Region: c.Region, Source: "mostPopular", Rank: c.Page*50 + i + 1, VideoID: v.ID,
				Title: v.Snippet.Title, Channel: v.Snippet.ChannelTitle, Views: views}); err != nil {
				return videos, 0, err
			}
		}
		videos += len(page.Items)
		c.Page++
		c.Token, c.Search = page.NextPageToken, page.NextPageToken == ""
		if err := run.Save(ctx, c); err != nil {
			return videos, 0, err
		}
	}

	var found struct {
		Items []struct {
			ID struct {
				VideoID string `json:"videoId"`
			} `json:"id"`
			Snippet struct {
				Title        string `json:"title"`
				ChannelTitle string `json:"channelTitle"`
			} `json:"snippet"`
		} `json:"items"`
	}
	q := url.Values{"part": {"snippet"}, "type": {"video"}, "order": {"viewCount"}, "regionCode": {c.Region}, "maxResults": {"50"}}
	if err := t.get(ctx, "search", q, &found); err != nil {
		return videos, 0, err
	}
	for i, r := range found.Items {
		if err := t.write(item{Region: c.Region, Source: "search", Rank: i + 1, VideoID: r.ID.VideoID,
			Title: r.Snippet.Title, Channel: r.Snippet.ChannelTitle}); err != nil {
			return videos, 0, err
		}
	}
	if next := indexOf(c.Region) + 1; next < len(regions) {
		if err := run.Save(ctx, cursor{Region: regions[next]}); err != nil {
			return videos, len(found.Items), err
		}
	}
	return videos, len(found.Items), nil
}

// get calls the API resource with query q and decodes the JSON answer into
// v. A spent budget comes back from the metered client as an error matching
// quota.ErrExhausted, whether the meter refused the request or the upstream
// did (403 quotaExceeded).
func (t *trending) get(ctx context.Context, resource string, q url.Values, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.base+"/youtube/v3/"+resource+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Goog-Api-Key", t.key)
	resp, err := t.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s.list %s: %w", resource, q.Get("regionCode"), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("%s.list %s: read: %w", resource, q.Get("regionCode"), err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Message string `json:"message"`
				Errors  []struct {
					Reason string `json:"reason"`
				} `json:"errors"`
			} `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		reason := ""
		if len(e.Error.Errors) > 0 {
			reason = " (" + e.Error.Errors[0].Reason + ")"
		}
		return fmt.Errorf("%s.list %s: %s: %s%s", resource, q.Get("regionCode"), resp.Status, e.Error.Message, reason)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%s.list %s: %w", resource, q.Get("regionCode"), err)
	}
	return nil
}

func (t *trending) write(it item) error {
	it.FetchedAt = t.now().UTC()
	b, err := json.Marshal(it)
	if err != nil {
		return err
	}
	_, err = t.out.Write(append(b, '\n'))
	return err
}

func indexOf(region string) int {
	for i, r := range regions {
		if r == region {
			return i
		}
	}
	return -1
}

// budgetLeft describes what is left of lim's budgets for cred, e.g.
// "units 26/30, search 93/95".
func budgetLeft(lim *quota.Limiter, cred quota.Credential) func(context.Context) string {
	return func(ctx context.Context) string {
		us, err := lim.Status(ctx, cred)
		if err != nil {
			return "unknown (" + err.Error() + ")"
		}
		s := ""
		for _, u := range us {
			if u.Budget != "units" && u.Budget != "search" {
				continue
			}
			if s != "" {
				s += ", "
			}
			s += fmt.Sprintf("%s %d/%d", u.Budget, u.Remaining, u.Limit)
		}
		return s
	}
}
