// Live pages: the console pushes "changed" over server-sent events when
// something a page shows changed; the page then fetches itself and swaps
// its <main>. Nothing polls. Without this script every page still works:
// reload to see changes, forms post and redirect.
(function () {
  "use strict";
  var topic = document.body.getAttribute("data-live");
  if (!topic || !window.EventSource || !window.fetch || !window.DOMParser) {
    return;
  }
  var busy = false;
  var again = false;

  // A person typing a comment must not lose it to a refresh: say that the
  // page changed instead, and let them choose when.
  function editing() {
    var el = document.activeElement;
    if (!el) { return false; }
    if (el.tagName === "TEXTAREA" || el.tagName === "INPUT") { return el.value !== ""; }
    return false;
  }

  function refresh() {
    if (busy) { again = true; return; }
    if (editing()) {
      document.getElementById("stale").hidden = false;
      return;
    }
    busy = true;
    var focused = document.activeElement && document.activeElement.id;
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Console-Refresh": "1" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("main");
        var current = document.getElementById("main");
        if (fresh && current) {
          current.replaceWith(document.adoptNode(fresh));
          if (focused && document.getElementById(focused)) { document.getElementById(focused).focus(); }
        }
        document.body.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () { document.getElementById("stale").hidden = false; })
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  var stream = new EventSource("/events?topic=" + encodeURIComponent(topic));
  stream.addEventListener("changed", refresh);
  stream.addEventListener("signedout", function () {
    stream.close();
    window.location.reload();
  });
})();
