package ytsim

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// serve answers a charged request.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, method string, seq int64) {
	q := r.URL.Query()
	switch method {
	case "videos.list":
		s.videosList(w, q)
		return
	case "search.list":
		s.searchList(w, q)
		return
	case "captions.download":
		w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
		_, _ = fmt.Fprint(w, "1\n00:00:00,000 --> 00:00:01,000\nsimulated caption\n")
		return
	case "media.upload":
		writeJSON(w, http.StatusOK, map[string]any{"kind": "youtube#video", "id": fmt.Sprintf("sim-%d", seq)})
		return
	}
	resource, verb, _ := strings.Cut(method, ".")
	switch r.Method {
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	case http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{
			"kind": "youtube#" + resource + "ListResponse", "etag": etag(method), "items": []any{},
			"pageInfo": map[string]int{"totalResults": 0, "resultsPerPage": 0},
		})
	default:
		writeJSON(w, http.StatusOK, map[string]any{
			"kind": "youtube#" + strings.TrimSuffix(resource, "s"), "etag": etag(method + verb), "id": fmt.Sprintf("sim-%d", seq),
		})
	}
}

// --- deterministic data ---

// Video is the subset of a video resource the simulator returns.
type Video struct {
	Kind       string          `json:"kind"`
	Etag       string          `json:"etag"`
	ID         string          `json:"id"`
	Snippet    VideoSnippet    `json:"snippet"`
	Statistics VideoStatistics `json:"statistics"`
}

// VideoSnippet is a video's snippet part.
type VideoSnippet struct {
	PublishedAt  string `json:"publishedAt"`
	ChannelID    string `json:"channelId"`
	Title        string `json:"title"`
	ChannelTitle string `json:"channelTitle"`
	CategoryID   string `json:"categoryId"`
}

// VideoStatistics is a video's statistics part (counts as strings, as the
// API sends them).
type VideoStatistics struct {
	ViewCount    string `json:"viewCount"`
	LikeCount    string `json:"likeCount"`
	CommentCount string `json:"commentCount"`
}

// VideoListResponse is the body of videos.list.
type VideoListResponse struct {
	Kind          string   `json:"kind"`
	Etag          string   `json:"etag"`
	Items         []Video  `json:"items"`
	NextPageToken string   `json:"nextPageToken,omitempty"`
	PrevPageToken string   `json:"prevPageToken,omitempty"`
	PageInfo      PageInfo `json:"pageInfo"`
}

// PageInfo is a list response's paging summary.
type PageInfo struct {
	TotalResults   int `json:"totalResults"`
	ResultsPerPage int `json:"resultsPerPage"`
}

func hash(parts ...string) []byte {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return h[:]
}

// videoID returns a YouTube-like 11-character id.
func videoID(parts ...string) string {
	return base64.RawURLEncoding.EncodeToString(hash(parts...)[:8])[:11]
}

func etag(s string) string { return base64.RawURLEncoding.EncodeToString(hash("etag", s)[:20]) }

// video returns the deterministic video at rank i (0-based) of a list.
func video(id, list string, i int) Video {
	h := hash("video", id)
	n := binary.BigEndian.Uint64(h[:8])
	views := 1000 + n%5_000_000
	published := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Duration(n%(90*24)) * time.Hour)
	return Video{
		Kind: "youtube#video", Etag: etag(id), ID: id,
		Snippet: VideoSnippet{
			PublishedAt:  published.Format(time.RFC3339),
			ChannelID:    "UC" + videoID("channel", id) + videoID("channel2", id)[:11],
			Title:        fmt.Sprintf("%s #%d", list, i+1),
			ChannelTitle: "Channel " + videoID("channel", id)[:6],
			CategoryID:   strconv.Itoa(int(n%30) + 1),
		},
		Statistics: VideoStatistics{
			ViewCount:    strconv.FormatUint(views, 10),
			LikeCount:    strconv.FormatUint(views/40, 10),
			CommentCount: strconv.FormatUint(views/900, 10),
		},
	}
}

// pageToken encodes an offset into an opaque token bound to its list.
func pageToken(list string, offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%s|%d", list, offset)))
}

func parseToken(list, tok string) (int, bool) {
	if tok == "" {
		return 0, true
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, false
	}
	l, off, ok := strings.Cut(string(b), "|")
	n, err := strconv.Atoi(off)
	if !ok || l != list || err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// paging reads maxResults and pageToken for a list of total items.
func paging(w http.ResponseWriter, q map[string][]string, list string, total int) (offset, size int, ok bool) {
	size = 5
	if v := first(q, "maxResults"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 50 {
			writeError(w, http.StatusBadRequest, "Invalid value for maxResults: must be 0 to 50.", "youtube.parameter", "invalidParameter", "INVALID_ARGUMENT")
			return 0, 0, false
		}
		size = n
	}
	offset, ok = parseToken(list, first(q, "pageToken"))
	if !ok || offset > total {
		writeError(w, http.StatusBadRequest, "The request specifies an invalid page token.", "youtube.parameter", "invalidPageToken", "INVALID_ARGUMENT")
		return 0, 0, false
	}
	return offset, min(size, total-offset), true
}

func first(q map[string][]string, k string) string {
	if v := q[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (s *Server) videosList(w http.ResponseWriter, q map[string][]string) {
	resp := VideoListResponse{Kind: "youtube#videoListResponse", Items: []Video{}}
	switch {
	case first(q, "id") != "":
		ids := strings.Split(first(q, "id"), ",")
		for i, id := range ids {
			if id != "" && len(resp.Items) < 50 {
				resp.Items = append(resp.Items, video(id, "Video", i))
			}
		}
		resp.PageInfo = PageInfo{TotalResults: len(resp.Items), ResultsPerPage: len(resp.Items)}
	case first(q, "chart") == "mostPopular":
		region := strings.ToUpper(first(q, "regionCode"))
		if region == "" {
			region = "US"
		}
		if len(region) != 2 {
			writeError(w, http.StatusBadRequest, "The regionCode parameter specifies an invalid region code.", "youtube.parameter", "invalidRegionCode", "INVALID_ARGUMENT")
			return
		}
		list := "mostPopular/" + region
		offset, size, ok := paging(w, q, list, s.popular)
		if !ok {
			return
		}
		for i := offset; i < offset+size; i++ {
			resp.Items = append(resp.Items, video(videoID(list, strconv.Itoa(i)), "Trending in "+region, i))
		}
		if offset+size < s.popular && size > 0 {
			resp.NextPageToken = pageToken(list, offset+size)
		}
		if offset > 0 {
			resp.PrevPageToken = pageToken(list, max(offset-size, 0))
		}
		resp.PageInfo = PageInfo{TotalResults: s.popular, ResultsPerPage: size}
	default:
		writeError(w, http.StatusBadRequest, "No filter selected. Expected one of: myRating, id, chart, idParam", "youtube.parameter", "missingRequiredParameter", "INVALID_ARGUMENT")
		return
	}
	resp.Etag = etag(fmt.Sprint(len(resp.Items), resp.NextPageToken))
	writeJSON(w, http.StatusOK, resp)
}

// SearchResult is one item of search.list.
type SearchResult struct {
	Kind string `json:"kind"`
	Etag string `json:"etag"`
	ID   struct {
		Kind    string `json:"kind"`
		VideoID string `json:"videoId"`
	} `json:"id"`
	Snippet VideoSnippet `json:"snippet"`
}

// SearchListResponse is the body of search.list.
type SearchListResponse struct {
	Kind          string         `json:"kind"`
	Etag          string         `json:"etag"`
	NextPageToken string         `json:"nextPageToken,omitempty"`
	RegionCode    string         `json:"regionCode,omitempty"`
	PageInfo      PageInfo       `json:"pageInfo"`
	Items         []SearchResult `json:"items"`
}

func (s *Server) searchList(w http.ResponseWriter, q map[string][]string) {
	query := first(q, "q")
	region := strings.ToUpper(first(q, "regionCode"))
	list := "search/" + region + "/" + query
	offset, size, ok := paging(w, q, list, s.results)
	if !ok {
		return
	}
	resp := SearchListResponse{Kind: "youtube#searchListResponse", RegionCode: region, Items: []SearchResult{}}
	for i := offset; i < offset+size; i++ {
		v := video(videoID(list, strconv.Itoa(i)), "Result for "+strconv.Quote(query), i)
		var r SearchResult
		r.Kind, r.Etag = "youtube#searchResult", v.Etag
		r.ID.Kind, r.ID.VideoID = "youtube#video", v.ID
		r.Snippet = v.Snippet
		resp.Items = append(resp.Items, r)
	}
	if offset+size < s.results && size > 0 {
		resp.NextPageToken = pageToken(list, offset+size)
	}
	resp.PageInfo = PageInfo{TotalResults: s.results, ResultsPerPage: size}
	resp.Etag = etag(list + strconv.Itoa(offset))
	writeJSON(w, http.StatusOK, resp)
}
