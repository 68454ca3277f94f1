// The live feed: Server-Sent Events from /console/feed (the browser resends
// Last-Event-ID on reconnect, the supervision tail cursor). A frame for a persona
// shown in the fleet table refreshes that row's state from /api/fleet.
(function () {
  "use strict";
  var list = document.getElementById("feed");
  if (!list || !window.EventSource) { return; }
  var table = document.getElementById("fleet");
  var pending = null;
  function refresh() {
    pending = null;
    fetch("/api/fleet", { credentials: "same-origin" }).then(function (r) { return r.json(); })
      .then(function (fleet) {
        fleet.personas.forEach(function (p) {
          var row = table && table.querySelector('tr[data-persona="' + CSS.escape(p.name) + '"]');
          if (!row) { return; }
          var cell = row.querySelector('[data-field="lifecycle"]');
          cell.textContent = p.lifecycle;
          cell.className = "state state-" + p.lifecycle;
        });
        var count = document.getElementById("pending-count");
        if (count) { count.textContent = fleet.pending_approvals; }
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
