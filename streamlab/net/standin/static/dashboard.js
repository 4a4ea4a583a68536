// The room dashboard: follows the stand-in's /dashboard/events feed with the browser's own EventSource.
// The browser reconnects by itself (after the feed's `retry:` hint) and sends Last-Event-ID, so the feed
// replays exactly what this page missed, or a snapshot of everything. Every value is written with
// textContent: a model name chosen by a learner is shown as text, never run as markup. Below the rows, the
// check-cell grid: one line per learner who sent a verdict, one column per exercise anyone sent.
//
// It redraws incrementally, so a room of thousands stays live on a projector (issue 34, N5): events only
// record what changed; once per animation frame the changed learners' rows (and their grid lines) are
// rebuilt, and nothing else. A snapshot is drawn in one go. The whole grid is rebuilt only when a new
// exercise column appears (at most the catalogue's few dozen times). The page passes its own `?key=` (the
// instructor's, in `StandIn.projector_url`) on to the feed, which keeps a place for it.
"use strict";

(function () {
  const ENDINGS = ["complete", "http_error", "cut", "client_gone", "cancelled", "stopped", "in_progress"];
  const MARKS = {"passed": "\u2713", "not yet": "\u2717", "not attempted": "\u00b7"};
  const body = document.getElementById("rows");
  const empty = document.getElementById("empty");
  const status = document.getElementById("status");
  const gridTable = document.getElementById("verdicts");
  const gridHead = document.getElementById("verdicts-head");
  const gridBody = document.getElementById("verdicts-body");
  const gridFoot = document.getElementById("verdicts-foot");
  const gridEmpty = document.getElementById("verdicts-empty");

  const rows = new Map(); // learner number -> {data, tr, line (its grid <tr> or null)}
  const numbers = []; // the numbers shown, ascending (new learners come last: appended, not sorted)
  let columns = []; // exercise ids shown in the grid, in exercise order
  const passed = new Map(); // exercise id -> learners whose last verdict on it is "passed"
  const passCells = new Map(); // exercise id -> its <td> in the grid's footer

  const changed = new Map(); // learner number -> latest row data, not drawn yet
  const forgotten = new Set(); // learner numbers to remove, not done yet
  let latestTotals = null;
  let frame = 0;

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

  function rowElement(row, fresh, reuse) { // `reuse`: the row's <tr>, refilled in place (no sibling restyled)
    const tr = reuse || document.createElement("tr");
    tr.replaceChildren();
    tr.dataset.number = String(row.number);
    // stripes by number, not :nth-child (which restyles every later row when one is replaced); a fresh row
    // is marked by a CSS animation that fades: no timer per row
    tr.className = (row.number % 2 ? "odd" : "even") + (fresh ? " " + fresh : "");
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
    return tr;
  }

  function position(n) { // where n is, or would go, in `numbers` (binary search)
    let lo = 0;
    let hi = numbers.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (numbers[mid] < n) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  function exerciseOrder(a, b) {
    const [la, ka] = a.split(".").map(Number);
    const [lb, kb] = b.split(".").map(Number);
    return la - lb || ka - kb;
  }

  function countPasses(row, sign) {
    for (const [id, verdict] of Object.entries(row.verdicts || {})) {
      if (verdict === "passed") passed.set(id, (passed.get(id) || 0) + sign);
    }
  }

  function gridLine(row, reuse) {
    const tr = reuse || document.createElement("tr");
    tr.replaceChildren();
    tr.dataset.number = String(row.number);
    tr.className = row.number % 2 ? "odd" : "even";
    cell(tr, "learner", row.learner);
    for (const id of columns) {
      const verdict = row.verdicts[id];
      const td = cell(tr, verdict ? "v v-" + verdict.replace(" ", "-") : "v", verdict ? MARKS[verdict] || "?" : "");
      td.dataset.exercise = id;
      td.dataset.verdict = verdict || "";
      td.title = id + ": " + (verdict || "no verdict yet");
    }
    return tr;
  }

  function hasVerdicts(row) {
    return Object.keys(row.verdicts || {}).length > 0;
  }

  function headCell(tr, className, text, span) {
    const th = document.createElement("th");
    th.scope = "col";
    th.className = className;
    th.textContent = text;
    if (span > 1) {
      th.colSpan = span;
      th.style.width = "calc(" + span + " * var(--cell))"; // the lines are flex rows (dashboard.css)
    }
    tr.appendChild(th);
  }

  function drawGridFrame() { // the head and the footer, for the current columns
    const labs = document.createElement("tr");
    const ks = document.createElement("tr");
    headCell(labs, "learner", "lab", 1);
    headCell(ks, "learner", "exercise", 1);
    let lab = null;
    for (const id of columns) {
      const [labOf, k] = id.split(".");
      const starts = labOf !== lab;
      if (starts) {
        headCell(labs, "lab", labOf, columns.filter((c) => c.startsWith(labOf + ".")).length);
        lab = labOf;
      }
      headCell(ks, starts ? "lab" : "", k, 1);
    }
    gridHead.replaceChildren(labs, ks);
    const foot = document.createElement("tr");
    cell(foot, "learner", "passed");
    passCells.clear();
    for (const id of columns) {
      const td = cell(foot, "", String(passed.get(id) || 0));
      td.dataset.exercise = id;
      passCells.set(id, td);
    }
    gridFoot.replaceChildren(foot);
  }

  function rebuildGrid() { // every line: only when the columns change, or after a snapshot
    const fragment = document.createDocumentFragment();
    for (const n of numbers) {
      const entry = rows.get(n);
      entry.line = hasVerdicts(entry.data) ? gridLine(entry.data, null) : null;
      if (entry.line) fragment.appendChild(entry.line);
    }
    gridBody.replaceChildren(fragment);
    drawGridFrame();
  }

  function nextLine(n) { // the grid line of the first learner after n that has one
    for (let i = position(n) + 1; i < numbers.length; i++) {
      const line = rows.get(numbers[i]).line;
      if (line) return line;
    }
    return null;
  }

  function newColumns(row) {
    return Object.keys(row.verdicts || {}).filter((id) => !columns.includes(id));
  }

  function apply(row, fresh) { // one learner's new data, into the table and the grid's bookkeeping
    const entry = rows.get(row.number);
    if (entry) {
      countPasses(entry.data, -1);
      entry.flip = !entry.flip; // two animation names taking turns: the "fresh" mark starts again each time
      rowElement(row, fresh && (entry.flip ? "fresh-b" : "fresh-a"), entry.tr);
      entry.data = row;
    } else {
      const tr = rowElement(row, fresh && "fresh-a", null);
      const at = position(row.number);
      const after = at < numbers.length ? rows.get(numbers[at]).tr : null;
      body.insertBefore(tr, after);
      numbers.splice(at, 0, row.number);
      rows.set(row.number, {data: row, tr: tr, line: null, flip: false});
    }
    countPasses(row, 1);
  }

  function drawLine(n) { // one learner's grid line, with the current columns
    const entry = rows.get(n);
    const line = hasVerdicts(entry.data) ? gridLine(entry.data, entry.line) : null;
    if (entry.line && !line) entry.line.remove();
    else if (line) gridBody.insertBefore(line, nextLine(n));
    entry.line = line;
  }

  function forget(n) {
    const entry = rows.get(n);
    if (!entry) return;
    countPasses(entry.data, -1);
    entry.tr.remove();
    if (entry.line) entry.line.remove();
    rows.delete(n);
    numbers.splice(position(n), 1);
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

  function showEmpty() {
    empty.hidden = rows.size > 0;
    gridTable.hidden = !columns.length;
    gridEmpty.hidden = columns.length > 0;
  }

  function draw() { // once per frame: only what changed since the last one
    frame = 0;
    for (const n of forgotten) forget(n);
    let added = [];
    for (const row of changed.values()) {
      added = added.concat(newColumns(row));
      apply(row, true);
    }
    if (added.length) {
      columns = [...new Set(columns.concat(added))].sort(exerciseOrder);
      rebuildGrid();
    } else {
      for (const n of changed.keys()) if (rows.has(n)) drawLine(n);
      for (const id of columns) passCells.get(id).textContent = String(passed.get(id) || 0);
    }
    changed.clear();
    forgotten.clear();
    if (latestTotals) totals(latestTotals);
    latestTotals = null;
    showEmpty();
  }

  function schedule() {
    if (!frame) frame = requestAnimationFrame(draw);
  }

  function snapshot(data) {
    changed.clear();
    forgotten.clear();
    rows.clear();
    numbers.length = 0;
    passed.clear();
    const fragment = document.createDocumentFragment();
    const ordered = data.rows.slice().sort((a, b) => a.number - b.number);
    for (const row of ordered) {
      const tr = rowElement(row, false, null);
      fragment.appendChild(tr);
      numbers.push(row.number);
      rows.set(row.number, {data: row, tr: tr, line: null});
      countPasses(row, 1);
    }
    body.replaceChildren(fragment);
    columns = [...new Set(ordered.flatMap((r) => Object.keys(r.verdicts || {})))].sort(exerciseOrder);
    rebuildGrid();
    totals(data.totals);
    showEmpty();
  }

  function setStatus(kind, text) {
    status.className = "status " + kind;
    status.textContent = text;
  }

  const key = new URLSearchParams(location.search).get("key");
  const feed = new EventSource("dashboard/events" + (key ? "?key=" + encodeURIComponent(key) : ""));
  feed.addEventListener("open", () => setStatus("live", "live"));
  feed.addEventListener("error", () => setStatus("reconnecting", "reconnecting\u2026"));
  feed.addEventListener("snapshot", (event) => snapshot(JSON.parse(event.data)));
  feed.addEventListener("learner", (event) => {
    const data = JSON.parse(event.data);
    forgotten.delete(data.row.number);
    changed.set(data.row.number, data.row);
    latestTotals = data.totals;
    schedule();
  });
  feed.addEventListener("forget", (event) => {
    const data = JSON.parse(event.data);
    changed.delete(data.number);
    forgotten.add(data.number);
    latestTotals = data.totals;
    schedule();
  });
})();
