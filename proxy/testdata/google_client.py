#!/usr/bin/env python3
"""google-api-python-client through quotactl proxy: the library's own
request building, key handling and error types, against the proxy's base
URL ($YOUTUBE_API) with the key in $YOUTUBE_KEY. It lists popular videos
until the proxy refuses with YouTube's 403 quotaExceeded, which the library
raises as HttpError and does not retry."""
import json
import os
import sys

from googleapiclient.discovery import build
from googleapiclient.errors import HttpError

yt = build("youtube", "v3", developerKey=os.environ["YOUTUBE_KEY"],
           client_options={"api_endpoint": os.environ["YOUTUBE_API"].rstrip("/") + "/"},
           static_discovery=True)
calls = 0
while True:
    try:
        page = yt.videos().list(part="id", chart="mostPopular", regionCode="US",
                                maxResults=5).execute()
    except HttpError as err:
        reasons = [e.get("reason") for e in json.loads(err.content)["error"]["errors"]]
        print(f"stopped after {calls} calls: HTTP {err.resp.status} {reasons}")
        sys.exit(0 if err.resp.status == 403 and reasons == ["quotaExceeded"] else 1)
    calls += 1
    print(f"call {calls}: {len(page['items'])} videos")
