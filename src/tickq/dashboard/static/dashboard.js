// tickq dashboard: local times, live refresh and confirmations. No build step, no
// dependencies; every page works without it.
(function () {
  "use strict";
  var body = document.body;
  var every = parseFloat(body.getAttribute("data-refresh") || "0");
  var STORE = "tickq-live";

  function localTimes(root) {
    var zone = "";
    try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { zone = ""; }
    var fmt = new Intl.DateTimeFormat(undefined, {
      year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit"
    });
    root.querySelectorAll("time[data-local]").forEach(function (el) {
      var at = new Date(el.getAttribute("datetime"));
      if (isNaN(at)) { return; }
      var text = fmt.format(at) + (zone ? " (" + zone + ")" : "");
      el.title = el.textContent + " = " + text;
      if (el.closest(".show-local") && !(el.nextElementSibling && el.nextElementSibling.classList.contains("local"))) {
        var span = document.createElement("span");
        span.className = "local muted small";
        span.textContent = "your time: " + text;
        el.insertAdjacentElement("afterend", span);
        el.insertAdjacentText("afterend", " ");
      }
    });
    var tz = document.getElementById("viewer-tz");
    if (tz) { tz.textContent = zone || "local"; }
  }

  function confirmations() {
    document.addEventListener("submit", function (ev) {
      var msg = ev.target.getAttribute && ev.target.getAttribute("data-confirm");
      if (msg && !window.confirm(msg)) { ev.preventDefault(); }
    });
  }

  function busy(live) {
    var active = document.activeElement;
    if (active && live.contains(active) && /^(INPUT|SELECT|TEXTAREA|BUTTON|SUMMARY)$/.test(active.tagName)) { return true; }
    var sel = window.getSelection && window.getSelection();
    return !!(sel && sel.toString() && live.contains(sel.anchorNode));
  }

  function openDetails(root) {
    var open = [];
    root.querySelectorAll("details").forEach(function (d, i) { open[i] = d.open; });
    return open;
  }

  function refresh(toggle, status) {
    var live = document.getElementById("live");
    if (!live || toggle.getAttribute("aria-pressed") !== "true" || document.hidden || busy(live)) { return; }
    fetch(window.location.href, { headers: { "X-Tickq-Refresh": "1" }, credentials: "same-origin", redirect: "manual" })
      .then(function (resp) {
        if (!resp.ok) { throw new Error(resp.status === 401 || resp.type === "opaqueredirect" ? "logged out: reload to log in" : "refresh failed (" + resp.status + ")"); }
        return resp.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
        if (!fresh || busy(live)) { return; }
        var open = openDetails(live);
        live.innerHTML = fresh.innerHTML;
        live.querySelectorAll("details").forEach(function (d, i) { if (i < open.length) { d.open = open[i]; } });
        localTimes(live);
        status.textContent = "Updated " + new Date().toLocaleTimeString();
      })
      .catch(function (err) {
        status.textContent = "Live refresh paused: " + err.message;
        toggle.setAttribute("aria-pressed", "false");
      });
  }

  function live() {
    var toggle = document.getElementById("live-toggle");
    var status = document.getElementById("live-status");
    if (!toggle || !status || !(every > 0) || !document.getElementById("live")) { return; }
    toggle.hidden = false;
    if (window.localStorage && localStorage.getItem(STORE) === "off") { toggle.setAttribute("aria-pressed", "false"); }
    toggle.addEventListener("click", function () {
      var on = toggle.getAttribute("aria-pressed") !== "true";
      toggle.setAttribute("aria-pressed", on ? "true" : "false");
      status.textContent = on ? "Live refresh on" : "Live refresh off";
      try { localStorage.setItem(STORE, on ? "on" : "off"); } catch (e) { /* private mode */ }
    });
    window.setInterval(function () { refresh(toggle, status); }, every * 1000);
  }

  localTimes(document);
  confirmations();
  live();
})();
