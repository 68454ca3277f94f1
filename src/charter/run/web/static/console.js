// The console's one small script (no build step, nothing from a CDN):
// - the live feed: Server-Sent Events from /console/feed, starting strictly after the event
//   the page was rendered at (the browser resends Last-Event-ID on reconnect: the supervision
//   tail cursor); the rows of personas named by new frames are re-rendered by the server
//   (/console?persona=...: the same template, only those statuses computed);
// - relative times ("3 min ago"), the exact time stays in the title (hover);
// - sorting and filtering a table; keyboard: j/k move through a list, Enter opens,
//   a/d approve or deny the selected approval after a confirmation.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var rendered = main && main.getAttribute("data-now") ? Date.parse(main.getAttribute("data-now")) : Date.now();
  var loaded = Date.now();

  function ago(text) {
    var then = Date.parse(text);
    if (isNaN(then)) { return null; }
    var s = (rendered + (Date.now() - loaded) - then) / 1000;
    var future = s < 0; s = Math.abs(s);
    var words = s < 45 ? Math.floor(s) + " s" : s < 3600 ? Math.round(s / 60) + " min"
      : s < 86400 ? Math.round(s / 3600) + " h" : Math.round(s / 86400) + " d";
    return future ? "in " + words : words + " ago";
  }
  function relative(root) {
    (root || document).querySelectorAll("time[data-rel]").forEach(function (t) {
      var words = ago(t.getAttribute("datetime"));
      if (words) { t.textContent = words; }
    });
  }
  relative();
  setInterval(relative, 30000);

  // -- sorting and filtering ---------------------------------------------------------
  function cellValue(row, col) {
    var cell = row.cells[col];
    if (!cell) { return ""; }
    var v = cell.getAttribute("data-sort");
    return v === null ? cell.textContent.trim() : v;
  }
  document.querySelectorAll("th button.sort").forEach(function (button) {
    button.addEventListener("click", function () {
      var th = button.closest("th");
      var table = button.closest("table");
      var col = parseInt(button.getAttribute("data-col"), 10);
      var ascending = th.getAttribute("aria-sort") !== "ascending";
      table.querySelectorAll("th[aria-sort]").forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = cellValue(a, col), y = cellValue(b, col);
        var numeric = x !== "" && y !== "" && !isNaN(Number(x)) && !isNaN(Number(y));
        var c = numeric ? Number(x) - Number(y) : x.localeCompare(y);
        return ascending ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
  var filter = document.querySelector("input[data-filter]");
  function applyFilter() {
    if (!filter) { return; }
    var table = document.querySelector(filter.getAttribute("data-filter"));
    var needle = filter.value.trim().toLowerCase();
    table.querySelectorAll("tbody tr[data-persona]").forEach(function (row) {
      row.hidden = needle !== "" && row.getAttribute("data-persona").toLowerCase().indexOf(needle) < 0;
    });
  }
  if (filter) { filter.addEventListener("input", applyFilter); }

  // -- keyboard ------------------------------------------------------------------------
  var list = document.querySelector("[data-list]");
  var selected = -1;
  function items() {
    if (!list) { return []; }
    return Array.prototype.filter.call(list.querySelectorAll(list.getAttribute("data-list")),
      function (el) { return !el.hidden; });
  }
  function select(index) {
    var all = items();
    if (!all.length) { return; }
    selected = Math.max(0, Math.min(all.length - 1, index));
    all.forEach(function (el, i) { el.classList.toggle("selected", i === selected); });
    var el = all[selected];
    var link = el.matches("article") ? null : el.querySelector("a");
    (link || el).focus();
    el.scrollIntoView({ block: "nearest" });
  }
  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) { return; }
    var tag = (event.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "textarea" || tag === "select") { return; }
    if (event.key === "j") { event.preventDefault(); select(selected + 1); }
    else if (event.key === "k") { event.preventDefault(); select(selected < 0 ? 0 : selected - 1); }
    else if ((event.key === "a" || event.key === "d") && selected >= 0) {
      var article = items()[selected];
      if (!article || !article.matches("article.approval")) { return; }
      event.preventDefault();
      var verdict = event.key === "a" ? "approve" : "deny";
      var title = article.querySelector("h2").textContent;
      if (window.confirm(verdict.charAt(0).toUpperCase() + verdict.slice(1) + ": " + title + "?")) {
        article.querySelector('button[name="decision"][value="' + verdict + '"]').click();
      }
    }
  });

  // -- the live feed ---------------------------------------------------------------------
  var feed = document.getElementById("feed");
  if (!feed || !window.EventSource) { return; }
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
          if (now) {
            var copy = document.importNode(row, true);
            if (now.classList.contains("selected")) { copy.classList.add("selected"); }
            now.replaceWith(copy);
            relative(copy);
          }
        });
        applyFilter();
        var count = document.getElementById("pending-count");
        var next = fresh.getElementById("pending-count");
        if (count && next) { count.textContent = next.textContent; }
      });
  }
  var source = new EventSource(feed.getAttribute("data-src"));
  source.addEventListener("frame", function (message) {
    var frame = JSON.parse(message.data);
    var item = document.createElement("li");
    item.textContent = frame.event_id + " " + frame.occurred_at + " " + frame.persona_id + " " + frame.update_kind;
    feed.insertBefore(item, feed.firstChild);
    while (feed.childNodes.length > 200) { feed.removeChild(feed.lastChild); }
    changed[frame.persona_id] = true;
    if (!timer) { timer = setTimeout(refresh, 100); }
  });
})();
