// The room dashboard: follows the stand-in's /dashboard/events feed with the browser's own EventSource.
// The browser reconnects by itself (after the feed's `retry:` hint) and sends Last-Event-ID, so the feed
// replays exactly what this page missed, or a snapshot of everything. Every value is written with
// textContent: a model name chosen by a learner is shown as text, never run as markup.
"use strict";

(function () {
  const ENDINGS = ["complete", "http_error", "cut", "client_gone", "cancelled", "stopped", "in_progress"];
  const body = document.getElementById("rows");
  const empty = document.getElementById("empty");
  const status = document.getElementById("status");
  const rows = new Map(); // learner number -> <tr>

  function endingClass(name) {
    return "ending-" + (ENDINGS.includes(name) ? name : "other");
  }

  function cell(tr, className, text) {
    const td = document.createElement("td");
    td.className = className;
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }

  function chips(target, endings) {
    target.replaceChildren();
    for (const [name, count] of Object.entries(endings || {})) {
      const chip = document.createElement("span");
      chip.className = "chip " + endingClass(name);
      chip.textContent = name + " " + count;
      target.appendChild(chip);
    }
  }

  function ms(value) {
    return value === null || value === undefined ? "\u2013" : Math.round(value) + " ms";
  }

  function render(row) {
    const tr = document.createElement("tr");
    tr.dataset.number = String(row.number);
    cell(tr, "number", String(row.number));
    cell(tr, "learner", row.learner);
    cell(tr, "number", String(row.requests));
    cell(tr, "number now", row.active ? "\u25cf " + row.active : "");
    const model = cell(tr, "model", row.model === null ? "\u2013" : row.model);
    if (row.scenario && row.scenario !== row.model) {
      const scenario = document.createElement("div");
      scenario.className = "scenario";
      scenario.textContent = "scenario " + row.scenario;
      model.appendChild(scenario);
    }
    cell(tr, "ending " + endingClass(row.ending), row.ending === null ? "\u2013" : row.ending);
    chips(cell(tr, "endings", ""), row.endings);
    cell(tr, "number", String(row.retries));
    cell(tr, "number", ms(row.ttft_ms));
    const old = rows.get(row.number);
    if (old) {
      old.replaceWith(tr);
    } else {
      const after = [...rows.keys()].filter((n) => n > row.number).sort((a, b) => a - b)[0];
      body.insertBefore(tr, after === undefined ? null : rows.get(after));
    }
    rows.set(row.number, tr);
    tr.classList.add("fresh");
    setTimeout(() => tr.classList.remove("fresh"), 1500);
    empty.hidden = rows.size > 0;
  }

  function totals(t) {
    document.getElementById("total-learners").textContent = String(t.learners);
    document.getElementById("total-requests").textContent = String(t.requests);
    document.getElementById("total-active").textContent = String(t.active);
    document.getElementById("total-retries").textContent = String(t.retries);
    document.getElementById("total-ttft").textContent = ms(t.ttft_p50_ms);
    chips(document.getElementById("total-endings"), t.endings);
  }

  function setStatus(kind, text) {
    status.className = "status " + kind;
    status.textContent = text;
  }

  const feed = new EventSource("dashboard/events");
  feed.addEventListener("open", () => setStatus("live", "live"));
  feed.addEventListener("error", () => setStatus("reconnecting", "reconnecting\u2026"));
  feed.addEventListener("snapshot", (event) => {
    const data = JSON.parse(event.data);
    rows.clear();
    body.replaceChildren();
    data.rows.forEach(render);
    empty.hidden = rows.size > 0;
    totals(data.totals);
  });
  feed.addEventListener("learner", (event) => {
    const data = JSON.parse(event.data);
    render(data.row);
    totals(data.totals);
  });
  feed.addEventListener("forget", (event) => {
    const data = JSON.parse(event.data);
    const tr = rows.get(data.number);
    if (tr) {
      tr.remove();
      rows.delete(data.number);
    }
    empty.hidden = rows.size > 0;
    totals(data.totals);
  });
})();
