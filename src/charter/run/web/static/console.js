// The live feed: Server-Sent Events from /console/feed (the browser resends
// Last-Event-ID on reconnect: the supervision tail cursor). New frames re-render the
// fleet table from the server (the same template, no client-side rendering).
(function () {
  "use strict";
  var list = document.getElementById("feed");
  if (!list || !window.EventSource) { return; }
  var pending = null;
  function refresh() {
    pending = null;
    fetch(window.location.href, { credentials: "same-origin" })
      .then(function (r) { return r.text(); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        ["#fleet", "#pending-count"].forEach(function (sel) {
          var now = document.querySelector(sel), next = fresh.querySelector(sel);
          if (now && next) { now.innerHTML = next.innerHTML; }
        });
      });
  }
  var source = new EventSource(list.getAttribute("data-src"));
  source.addEventListener("frame", function (message) {
    var frame = JSON.parse(message.data);
    var item = document.createElement("li");
    item.textContent = frame.event_id + " " + frame.occurred_at + " " + frame.persona_id + " " + frame.update_kind;
    list.insertBefore(item, list.firstChild);
    while (list.childNodes.length > 200) { list.removeChild(list.lastChild); }
    if (!pending) { pending = setTimeout(refresh, 50); }
  });
})();
