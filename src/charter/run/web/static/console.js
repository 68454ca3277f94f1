// The live feed: Server-Sent Events from /console/feed, starting strictly after the
// event the page was rendered at (the browser resends Last-Event-ID on reconnect: the
// supervision tail cursor). The personas named by new frames have their rows re-rendered
// by the server (/console?persona=...: the same template, only those statuses computed).
(function () {
  "use strict";
  var list = document.getElementById("feed");
  if (!list || !window.EventSource) { return; }
  var changed = {};
  var timer = null;
  function refresh() {
    timer = null;
    var params = new URLSearchParams(window.location.search);
    params.delete("persona");
    Object.keys(changed).forEach(function (name) { params.append("persona", name); });
    changed = {};
    fetch("/console?" + params.toString(), { credentials: "same-origin" })
      .then(function (r) { return r.text(); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        fresh.querySelectorAll("#fleet tbody tr[data-persona]").forEach(function (row) {
          var name = row.getAttribute("data-persona");
          var now = document.querySelector('#fleet tr[data-persona="' + CSS.escape(name) + '"]');
          if (now) { now.replaceWith(document.importNode(row, true)); }
        });
        var count = document.getElementById("pending-count");
        var next = fresh.getElementById("pending-count");
        if (count && next) { count.textContent = next.textContent; }
      });
  }
  var source = new EventSource(list.getAttribute("data-src"));
  source.addEventListener("frame", function (message) {
    var frame = JSON.parse(message.data);
    var item = document.createElement("li");
    item.textContent = frame.event_id + " " + frame.occurred_at + " " + frame.persona_id + " " + frame.update_kind;
    list.insertBefore(item, list.firstChild);
    while (list.childNodes.length > 200) { list.removeChild(list.lastChild); }
    changed[frame.persona_id] = true;
    if (!timer) { timer = setTimeout(refresh, 100); }
  });
})();
