#!/usr/bin/env python3
"""A trending-videos job metered by quotactl proxy: standard library only.

It lists the most popular videos of each region, page by page, through the
proxy ($YOUTUBE_API, default http://127.0.0.1:8787). It holds no API key:
the proxy adds its own. When the proxy refuses a call because the budget is
spent, the job stops cleanly (exit 0) and says when capacity returns; the
next run picks up from there.
"""
import json
import os
import sys
import urllib.error
import urllib.request

BASE = os.environ.get("YOUTUBE_API", "http://127.0.0.1:8787").rstrip("/")
REGIONS = sys.argv[1:] or ["US", "GB", "FR", "DE", "JP", "BR", "IN", "KR"]


def refusal(err):
    """The proxy's refusal, or None for any other error: a 429 problem
    document, or YouTube's own 403 quotaExceeded shape."""
    try:
        body = json.load(err)
    except ValueError:
        return None
    if err.code == 429:
        return body.get("detail", "budget spent")
    errors = body.get("error", {}).get("errors", [])
    if err.code == 403 and any(e.get("reason") == "quotaExceeded" for e in errors):
        return body["error"]["message"]
    return None


def main():
    videos = calls = 0
    for region in REGIONS:
        token = ""
        while True:
            url = (f"{BASE}/youtube/v3/videos?part=snippet,statistics"
                   f"&chart=mostPopular&regionCode={region}&maxResults=50")
            if token:
                url += "&pageToken=" + token
            try:
                with urllib.request.urlopen(url, timeout=30) as resp:
                    page = json.load(resp)
            except urllib.error.HTTPError as err:
                why = refusal(err)
                if why is None:
                    raise
                print(f"stopped: {why}")
                print(f"retry after {err.headers.get('Retry-After')}s; "
                      f"{calls} calls, {videos} videos this run")
                return 0
            calls += 1
            videos += len(page["items"])
            print(f"{region}: {len(page['items'])} videos")
            token = page.get("nextPageToken")
            if not token:
                break
    print(f"done: {calls} calls, {videos} videos")
    return 0


if __name__ == "__main__":
    sys.exit(main())
