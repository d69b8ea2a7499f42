// Wheelhouse dashboard client: live regions over one websocket per tab, the live switch, copy buttons and the
// log viewer. No framework; the server renders every fragment (docs/design/dashboard.md).
(function () {
  "use strict";

  // ---- Live regions ----
  var regions = new Map(); // id -> {el, kind, params, seq}
  var ws = null, backoff = 1000, retryTimer = null, enabled = true, n = 0;
  var dot = document.getElementById("live-dot");
  var sw = document.getElementById("live-switch");

  function setState(s) { if (dot) { dot.dataset.state = s; dot.title = "live updates: " + s; } document.documentElement.dataset.live = s; }

  function collect() {
    document.querySelectorAll("[data-live-region]").forEach(function (el) {
      if (!el.dataset.liveId) { el.dataset.liveId = "r" + (n++); }
      regions.set(el.dataset.liveId, { el: el, kind: el.dataset.liveRegion, params: el.dataset.liveParams || "", seq: 0 });
    });
  }

  function send(m) { if (ws && ws.readyState === 1) { ws.send(JSON.stringify(m)); } }

  function subscribeAll() {
    regions.forEach(function (r, id) { r.seq = 0; send({ t: "sub", id: id, region: r.kind, params: r.params }); });
    if (document.hidden) { send({ t: "pause" }); }
  }

  function connect() {
    if (!enabled || regions.size === 0 || ws) { return; }
    var url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ui/live";
    ws = new WebSocket(url);
    setState("connecting");
    ws.onopen = function () { backoff = 1000; setState("on"); subscribeAll(); };
    ws.onmessage = function (ev) {
      var m; try { m = JSON.parse(ev.data); } catch (e) { return; }
      var r = m.id ? regions.get(m.id) : null;
      if (m.t === "frag" && r) {
        if (m.seq <= r.seq) { return; } // an older render than the one shown
        r.seq = m.seq;
        r.el.innerHTML = m.html;
        r.el.dispatchEvent(new CustomEvent("live:update", { bubbles: true }));
      } else if (m.t === "gone" && r) {
        r.el.innerHTML = "";
        var p = document.createElement("p"); p.className = "gone"; p.setAttribute("role", "status");
        p.dataset.testid = "region-gone"; p.textContent = m.reason;
        r.el.appendChild(p);
        regions.delete(m.id);
      } else if (m.t === "bye") {
        // The server ended this tab's updates (signed out, removed from the team): what it showed goes too.
        enabled = false;
        setState("off");
        regions.forEach(function (r) { r.el.innerHTML = ""; var p = document.createElement("p"); p.className = "gone";
          p.setAttribute("role", "status"); p.dataset.testid = "region-gone"; p.textContent = m.reason; r.el.appendChild(p); });
        regions.clear();
        var b = document.getElementById("live-bye");
        if (b) { b.textContent = m.reason; b.hidden = false; }
      }
    };
    ws.onclose = function () {
      ws = null;
      if (!enabled) { setState("off"); return; }
      setState("retry");
      var wait = backoff / 2 + Math.random() * backoff / 2; // jitter: tabs of a restarted server spread out
      backoff = Math.min(backoff * 2, 30000);
      retryTimer = setTimeout(connect, wait);
    };
  }

  function setEnabled(on) {
    enabled = on;
    try { localStorage.setItem("wh-live", on ? "on" : "off"); } catch (e) { /* private mode */ }
    if (on) { connect(); } else { clearTimeout(retryTimer); if (ws) { ws.close(); } setState("off"); }
  }

  document.addEventListener("visibilitychange", function () { send({ t: document.hidden ? "pause" : "resume" }); });
  setInterval(function () { send({ t: "ping" }); }, 25000);

  // ---- Navigation selects (team and cluster switchers) ----
  document.querySelectorAll("select[data-nav]").forEach(function (s) {
    s.addEventListener("change", function () { if (s.value) { location.href = s.value; } });
  });

  // ---- Copy buttons ----
  document.addEventListener("click", function (ev) {
    var b = ev.target.closest("[data-copy-target]");
    if (!b) { return; }
    var t = document.getElementById(b.dataset.copyTarget);
    if (!t) { return; }
    var text = t.textContent.trim();
    var done = function () { b.dataset.copied = "true"; b.textContent = "Copied"; };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { fallbackCopy(t); done(); });
    } else { fallbackCopy(t); done(); }
  });
  function fallbackCopy(el) {
    var r = document.createRange(); r.selectNodeContents(el);
    var sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(r);
    try { document.execCommand("copy"); } catch (e) { /* the text stays selected for Ctrl+C */ }
  }

  // ---- Logs ----
  var logs = document.getElementById("logs");
  if (logs && logs.dataset.stream) {
    var search = document.getElementById("log-search");
    var follow = document.getElementById("log-follow");
    var status = document.getElementById("log-status");
    var partial = "";
    var match = function (line) { var q = search ? search.value.toLowerCase() : ""; return !q || line.textContent.toLowerCase().indexOf(q) >= 0; };
    var addLine = function (text) {
      var d = document.createElement("div"); d.textContent = text;
      if (!match(d)) { d.className = "hidden"; }
      logs.appendChild(d);
    };
    if (search) {
      search.addEventListener("input", function () {
        logs.querySelectorAll("div").forEach(function (d) { d.className = match(d) ? "" : "hidden"; });
      });
    }
    var ctrl = new AbortController();
    fetch(logs.dataset.stream, { signal: ctrl.signal, credentials: "same-origin" }).then(function (resp) {
      if (!resp.ok) { return resp.text().then(function (t) { status.textContent = t || resp.statusText; status.className = "error"; }); }
      status.textContent = "streaming"; status.dataset.state = "streaming";
      var reader = resp.body.getReader(), dec = new TextDecoder();
      var pump = function () {
        return reader.read().then(function (r) {
          if (r.done) { if (partial) { addLine(partial); partial = ""; } status.textContent = "ended"; status.dataset.state = "ended"; return; }
          var lines = (partial + dec.decode(r.value, { stream: true })).split("\n");
          partial = lines.pop();
          lines.forEach(addLine);
          if (!follow || follow.checked) { logs.scrollTop = logs.scrollHeight; }
          return pump();
        });
      };
      return pump();
    }).catch(function (e) { if (e.name !== "AbortError") { status.textContent = "disconnected: reload to resume"; status.className = "error"; } });
    window.addEventListener("pagehide", function () { ctrl.abort(); });
  }

  // ---- Start ----
  collect();
  var saved = null; try { saved = localStorage.getItem("wh-live"); } catch (e) { /* private mode */ }
  enabled = saved !== "off";
  if (sw) { sw.checked = enabled; sw.addEventListener("change", function () { setEnabled(sw.checked); }); }
  if (enabled) { connect(); } else { setState("off"); }
})();
