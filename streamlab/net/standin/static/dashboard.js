// The room dashboard: follows the stand-in's /dashboard/events feed with the browser's own EventSource.
// The browser reconnects by itself (after the feed's `retry:` hint) and sends Last-Event-ID, so the feed
// replays exactly what this page missed, or a snapshot of everything. Every value is written with
// textContent: a model name chosen by a learner is shown as text, never run as markup. Below the rows, the
// check-cell grid: one line per learner who sent a verdict, one column per exercise anyone sent.
"use strict";

(function () {
  const ENDINGS = ["complete", "http_error", "cut", "client_gone", "cancelled", "stopped", "in_progress"];
  const body = document.getElementById("rows");
  const empty = document.getElementById("empty");
  const status = document.getElementById("status");
  const rows = new Map(); // learner number -> <tr>
  const seen = new Map(); // learner number -> the row's data, for the grid
  const MARKS = {"passed": "\u2713", "not yet": "\u2717", "not attempted": "\u00b7"};
  let gridPending = false;

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
    seen.set(row.number, row);
    scheduleGrid();
  }

  function exerciseOrder(a, b) {
    const [la, ka] = a.split(".").map(Number);
    const [lb, kb] = b.split(".").map(Number);
    return la - lb || ka - kb;
  }

  function scheduleGrid() {  // a burst of events redraws the grid once
    if (!gridPending) {
      gridPending = true;
      setTimeout(() => { gridPending = false; grid(); }, 50);
    }
  }

  function headCell(tr, className, text, span) {
    const th = document.createElement("th");
    th.scope = "col";
    th.className = className;
    th.textContent = text;
    if (span > 1) th.colSpan = span;
    tr.appendChild(th);
  }

  function grid() {
    const learners = [...seen.values()].filter((r) => Object.keys(r.verdicts || {}).length)
      .sort((a, b) => a.number - b.number);
    const columns = [...new Set(learners.flatMap((r) => Object.keys(r.verdicts)))].sort(exerciseOrder);
    const head = document.getElementById("verdicts-head");
    const body = document.getElementById("verdicts-body");
    const foot = document.getElementById("verdicts-foot");
    document.getElementById("verdicts").hidden = !columns.length;
    document.getElementById("verdicts-empty").hidden = columns.length > 0;
    const labs = document.createElement("tr");
    const numbers = document.createElement("tr");
    headCell(labs, "learner", "lab", 1);
    headCell(numbers, "learner", "exercise", 1);
    let lab = null;
    for (const id of columns) {
      const [labOf, k] = id.split(".");
      const starts = labOf !== lab;
      if (starts) {
        headCell(labs, "lab", labOf, columns.filter((c) => c.startsWith(labOf + ".")).length);
        lab = labOf;
      }
      headCell(numbers, starts ? "lab" : "", k, 1);
    }
    head.replaceChildren(labs, numbers);
    body.replaceChildren(...learners.map((r) => {
      const tr = document.createElement("tr");
      tr.dataset.number = String(r.number);
      cell(tr, "learner", r.learner);
      for (const id of columns) {
        const verdict = r.verdicts[id];
        const td = cell(tr, verdict ? "v v-" + verdict.replace(" ", "-") : "v", verdict ? MARKS[verdict] || "?" : "");
        td.dataset.exercise = id;
        td.dataset.verdict = verdict || "";
        td.title = id + ": " + (verdict || "no verdict yet");
      }
      return tr;
    }));
    const passed = document.createElement("tr");
    cell(passed, "learner", "passed");
    for (const id of columns) {
      const n = learners.filter((r) => r.verdicts[id] === "passed").length;
      cell(passed, "", String(n)).dataset.exercise = id;
    }
    foot.replaceChildren(passed);
  }

  function totals(t) {
    document.getElementById("total-learners").textContent = String(t.learners);
    document.getElementById("total-requests").textContent = String(t.requests);
    document.getElementById("total-active").textContent = String(t.active);
    document.getElementById("total-retries").textContent = String(t.retries);
    document.getElementById("total-ttft").textContent = ms(t.ttft_p50_ms);
    document.getElementById("ttft-name").textContent =
      t.ttft_streams ? "median TTFT, last " + t.ttft_streams + (t.ttft_streams === 1 ? " stream" : " streams")
        : "median TTFT";
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
    seen.clear();
    body.replaceChildren();
    data.rows.forEach(render);
    empty.hidden = rows.size > 0;
    totals(data.totals);
    grid();
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
    seen.delete(data.number);
    scheduleGrid();
    empty.hidden = rows.size > 0;
    totals(data.totals);
  });
})();
