// quotactl dashboard: live updates over server-sent events. The server
// sends the page's live part as HTML it has already escaped; this script
// only swaps it in and says whether the page is live.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var dot = document.getElementById("live");
  var text = document.getElementById("live-text");
  var refresh = parseInt(document.body.getAttribute("data-refresh"), 10) || 5000;

  function live(ok, what) {
    dot.className = "dot " + (ok ? "ok" : "down");
    text.textContent = what;
  }

  function keepScroll(update) {
    var y = window.scrollY;
    update();
    window.scrollTo(0, y);
  }

  function poll() {
    // Without EventSource (or behind a proxy that buffers it): poll.
    fetch("/fragment", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) { throw new Error(r.status); }
        return r.text();
      })
      .then(function (html) {
        keepScroll(function () { main.innerHTML = html; });
        live(true, "live (polling)");
      })
      .catch(function () { live(false, "store unreachable, retrying"); })
      .finally(function () { setTimeout(poll, refresh); });
  }

  if (!window.EventSource) {
    setTimeout(poll, refresh);
    return;
  }
  var es = new EventSource("/events");
  es.addEventListener("main", function (e) {
    keepScroll(function () { main.innerHTML = e.data; });
    live(true, "live");
  });
  es.addEventListener("same", function () { live(true, "live"); });
  es.addEventListener("down", function () { live(false, "store unreachable, retrying"); });
  es.onerror = function () { live(false, "reconnecting"); };
  es.onopen = function () { live(true, "live"); };
})();
