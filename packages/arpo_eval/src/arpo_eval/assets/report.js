// arpo-eval report: expand task rows into their step-by-step screenshots; filter by domain/status.
// State can be set in the URL hash: #task=<id>&domain=<d>&status=<pass|partial|fail|infra|not-run>.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("episodes").textContent);
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr.task"));
  var domainSel = document.getElementById("f-domain");
  var statusSel = document.getElementById("f-status");
  var shown = document.getElementById("shown-count");

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }

  function image(src, alt) {
    var img = el("img");
    img.alt = alt;
    img.onload = function () { img.setAttribute("data-loaded", "1"); };
    img.onerror = function () { img.setAttribute("data-loaded", "error"); };
    img.onclick = function (ev) { ev.stopPropagation(); window.open(src, "_blank"); };
    img.src = src;
    return img;
  }

  function stepCard(label, shot, step) {
    var card = el("div", "step");
    card.appendChild(el("div", "n", label));
    if (shot) card.appendChild(image(shot, label));
    if (step) {
      if (step.thought) card.appendChild(el("pre", "thought", "Thought: " + step.thought));
      card.appendChild(el("pre", "action", "Action: " + step.action));
      if (step.executed !== null && step.executed !== undefined && step.executed !== step.action)
        card.appendChild(el("div", "note", "executed: " + step.executed));
      if (step.replaced) card.appendChild(el("div", "note", "replaced by FAIL at the step limit (standard protocol)"));
      if (step.action_error) card.appendChild(el("div", "error", "not executed: " + step.action_error));
      if (step.infra_error) card.appendChild(el("div", "error", "infrastructure error: " + step.infra_error));
      if (step.done) card.appendChild(el("div", "n", "episode ended, reward " + step.reward));
    }
    return card;
  }

  function fill(detailCell, taskId) {
    if (detailCell.getAttribute("data-filled")) return;
    detailCell.setAttribute("data-filled", "1");
    (data[taskId] || []).forEach(function (ep) {
      var box = el("div", "trial");
      var score = ep.score === null ? "no score" : "score " + ep.score;
      box.appendChild(el("h4", null, "trial " + ep.trial + ": " + score + ", " + ep.steps.length + " steps"));
      if (ep.infra_error) box.appendChild(el("div", "error", "infrastructure error (not a score): " + ep.infra_error));
      box.appendChild(el("div", "instruction", ep.instruction));
      var strip = el("div", "steps");
      // the screen the agent saw before step n is the screenshot saved after step n-1
      var seen = ep.first;
      ep.steps.forEach(function (s) {
        strip.appendChild(stepCard("step " + s.n, seen, s));
        seen = s.shot;
      });
      if (seen) strip.appendChild(stepCard("final screen", seen, null));
      box.appendChild(strip);
      detailCell.appendChild(box);
    });
  }

  function setOpen(row, open) {
    var detail = row.nextElementSibling;
    if (open) fill(detail.firstElementChild, row.getAttribute("data-task"));
    detail.classList.toggle("hidden", !open);
    row.classList.toggle("open", open);
    row.querySelector(".toggle").textContent = open ? "\u25be" : "\u25b8";
  }

  function applyFilters() {
    var d = domainSel.value, s = statusSel.value, n = 0;
    rows.forEach(function (row) {
      var ok = (!d || row.getAttribute("data-domain") === d) && (!s || row.getAttribute("data-status") === s);
      row.classList.toggle("hidden", !ok);
      if (!ok) setOpen(row, false);
      if (ok) n += 1;
    });
    shown.textContent = n + " of " + rows.length + " tasks shown";
  }

  function applyHash() {
    var params = {};
    window.location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) params[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1));
    });
    if ("domain" in params) domainSel.value = params.domain;
    if ("status" in params) statusSel.value = params.status;
    applyFilters();
    if (params.task) {
      rows.forEach(function (row) {
        if (row.getAttribute("data-task") === params.task) {
          setOpen(row, true);
          row.scrollIntoView();
        }
      });
    }
  }

  rows.forEach(function (row) {
    row.addEventListener("click", function () { setOpen(row, row.classList.contains("open") ? false : true); });
  });
  domainSel.addEventListener("change", applyFilters);
  statusSel.addEventListener("change", applyFilters);
  window.addEventListener("hashchange", applyHash);
  applyHash();
  document.body.setAttribute("data-ready", "1");
})();
