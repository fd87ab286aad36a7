// The preparer's web dashboard: keeps the page's <main id="live"> current from the server's
// event stream (the server renders the HTML), shows when the stream is lost, keeps focus on
// the same link across updates, and gives the terminal dashboard's keys: 1-4 views, d
// deployments, / filter.
(function () {
  "use strict";
  var live = document.getElementById("live");
  var connection = document.getElementById("connection");
  var url = document.body.getAttribute("data-events");
  function state(text, lost) {
    connection.textContent = text;
    connection.className = lost ? "lost" : "";
  }
  if (url && window.EventSource) {
    var events = new EventSource(url);
    events.addEventListener("open", function () { state("live", false); });
    // A browser allows six HTTP/1.1 connections to a server: a page left behind (kept in the
    // back-forward cache) must give its stream's connection back.
    window.addEventListener("pagehide", function () { events.close(); });
    events.addEventListener("error", function () { state("connection lost, reconnecting…", true); });
    events.addEventListener("live", function (event) {
      var focused = document.activeElement;
      var href = focused && live.contains(focused) ? focused.getAttribute("href") : null;
      live.innerHTML = event.data;
      live.setAttribute("data-updated", String(Date.now()));
      if (href) {
        var again = live.querySelector('a[href="' + href + '"]');
        if (again) { again.focus(); }
      }
    });
  }
  document.addEventListener("submit", function (event) {
    var question = event.target.getAttribute("data-confirm");
    if (question && !window.confirm(question)) { event.preventDefault(); }
  });
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    if (target && /^(INPUT|SELECT|TEXTAREA)$/.test(target.tagName)) { return; }
    var views = { "1": "/templates", "2": "/sites", "3": "/plugins", "4": "/", "d": "/" };
    if (views[event.key]) {
      event.preventDefault();
      window.location.href = views[event.key];
    } else if (event.key === "/") {
      var first = document.querySelector("form.filter input");
      if (first) { event.preventDefault(); first.focus(); }
    }
  });
})();
