// The stand-in's chat page: one streamed answer read by the browser, three ways, and rendered two ways.
//
// Plain modern JavaScript, no build step and no library: what every chat UI does under its framework.
//
//   fetch + ReadableStream   POST /v1/chat/completions with an Authorization header; the body is piped through
//                            a TextDecoderStream (UTF-8 decoded *as a stream*: a character cut between two
//                            network chunks is joined, never turned into U+FFFD) into a small SSE parser.
//   EventSource              GET /v1/chat/stream?model=M&key=K: the browser's own SSE client. It can only GET and
//                            sends no header you choose, so the key travels in the URL (or a cookie). It
//                            reconnects by itself, after a clean end too, sending Last-Event-ID.
//   fetch-event-source style fetch with EventSource's conveniences, modelled on @microsoft/fetch-event-source,
//                            whose default openWhenHidden=false aborts the request when the tab is hidden and
//                            sends it again when the tab is shown (Azure/fetch-event-source#36, #79).
//
// Rendering: on every token (each delta re-renders the whole answer through `markdown`, as the pattern in
// vercel/ai#3440 does) or once per animation frame (deltas pile up; one render per frame paints them all).
// Stop: "abort" calls AbortController.abort(), which closes the connection, so the server stops generating;
// "only stop rendering" is the bug of vercel/ai#10719: the screen freezes while the model writes on.
//
// Every step leaves a performance mark named "<run>:<step>" (see the Performance panel): request-sent,
// response-headers, first-byte (the first body bytes), first-event, first-text (the first delta with text), first-visible-text (after
// the frame that painted it), done. The driver `python -m streamlab.net.browser` calls `streamlab.chat(...)`
// through Playwright and reads the same results this page shows.
"use strict";

(function () {
  // -- a small SSE parser: text in, events out (WHATWG HTML 9.2.6, "Interpreting an event stream") --------------

  class SSEParser {
    constructor() {
      this.buffer = ""; // the start of a line whose end has not arrived yet
      this.data = [];
      this.eventType = "";
      this.lastEventId = ""; // persists across events (and, in EventSource, across reconnects)
      this.retry = null;
      this.pendingCR = false; // the last chunk ended with CR: an LF starting the next one belongs to it
    }

    // Feed decoded text (any split); returns the events it completed.
    feed(text) {
      if (this.pendingCR && text.startsWith("\n")) text = text.slice(1);
      this.pendingCR = false;
      const events = [];
      const lines = (this.buffer + text).split(/\r\n|\r|\n/);
      this.buffer = lines.pop(); // the unfinished last line (or "" after a line end)
      if (this.buffer === "" && text.endsWith("\r")) this.pendingCR = true;
      for (const line of lines) {
        const event = this.line(line);
        if (event) events.push(event);
      }
      return events;
    }

    line(line) {
      if (line === "") { // a blank line dispatches the event, if it has data
        const event = this.data.length
          ? {type: this.eventType || "message", data: this.data.join("\n"), id: this.lastEventId}
          : null;
        this.data = [];
        this.eventType = "";
        return event;
      }
      if (line.startsWith(":")) return null; // a comment: a keep-alive, nothing to dispatch
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "data") this.data.push(value);
      else if (field === "event") this.eventType = value;
      else if (field === "id" && !value.includes("\0")) this.lastEventId = value;
      else if (field === "retry" && /^[0-9]+$/.test(value)) this.retry = Number(value);
      return null;
    }
  }

  // -- a small Markdown renderer: escape first (the model's text is data, never markup), then add tags ---------

  function escapeHtml(text) {
    return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }

  function inline(text) {
    return text
      .replace(/`([^`]+)`/g, "<code>$1</code>")
      .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
      .replace(/\*([^*]+)\*/g, "<em>$1</em>");
  }

  function markdown(source) {
    const html = [];
    let paragraph = [], list = [], code = null;
    const flush = () => {
      if (paragraph.length) html.push("<p>" + inline(paragraph.join(" ")) + "</p>");
      if (list.length) html.push("<ul>" + list.map((item) => "<li>" + inline(item) + "</li>").join("") + "</ul>");
      paragraph = [];
      list = [];
    };
    for (const raw of escapeHtml(source).split("\n")) {
      if (code !== null) { // inside a fenced block, until its closing fence (or the text so far ends)
        if (raw.startsWith("```")) { html.push("<pre><code>" + code.join("\n") + "</code></pre>"); code = null; }
        else code.push(raw);
      } else if (raw.startsWith("```")) { flush(); code = []; }
      else if (/^#{1,6} /.test(raw)) { flush(); const level = raw.indexOf(" "); html.push(`<h${level}>${inline(raw.slice(level + 1))}</h${level}>`); }
      else if (/^[-*] /.test(raw)) { if (paragraph.length) flush(); list.push(raw.slice(2)); }
      else if (raw.trim() === "") flush();
      else { if (list.length) flush(); paragraph.push(raw); }
    }
    if (code !== null) html.push("<pre><code>" + code.join("\n") + "</code></pre>");
    flush();
    return html.join("\n");
  }

  // -- marks: one per step, named "<run>:<step>", read back as ms after the run's request-sent ----------------

  let runs = 0;

  function marker(run) {
    const seen = new Set();
    const mark = (step) => {
      if (seen.has(step)) return;
      seen.add(step);
      performance.mark(`${run}:${step}`);
    };
    const read = () => {
      const start = performance.getEntriesByName(`${run}:request-sent`, "mark")[0];
      const out = {};
      for (const entry of performance.getEntriesByType("mark")) {
        if (start && entry.name.startsWith(run + ":")) out[entry.name.slice(run.length + 1)] = entry.startTime - start.startTime;
      }
      return out;
    };
    return {mark, read};
  }

  // After the frame that paints the current DOM: rAF callbacks run just before the browser renders a frame, and a
  // task queued from one runs after that rendering step. Inside a rAF callback, the frame is already this one.
  function afterPaint(callback, inFrame) {
    if (inFrame) setTimeout(callback, 0);
    else requestAnimationFrame(() => setTimeout(callback, 0));
  }

  // -- rendering: every token, or once per animation frame -----------------------------------------------------

  class Renderer {
    constructor(target, {mode = "frame", markdown: useMarkdown = true, mark}) {
      this.target = target;
      this.mode = mode;
      this.markdown = useMarkdown;
      this.mark = mark;
      this.text = "";
      this.updates = 0; // DOM updates made
      this.renderMs = 0; // time spent making them (Markdown, innerHTML, the autoscroll's layout)
      this.pending = null; // the scheduled frame's promise, in "frame" mode
      this.stopped = false;
      target.classList.toggle("plain", !useMarkdown);
      target.replaceChildren();
    }

    push(delta) {
      if (this.stopped) return;
      this.text += delta;
      if (this.mode === "token") this.paint(false);
      else if (!this.pending) {
        this.pending = new Promise((resolve) => requestAnimationFrame(() => {
          this.pending = null;
          this.paint(true);
          resolve();
        }));
      }
    }

    paint(inFrame) {
      const start = performance.now();
      if (this.markdown) this.target.innerHTML = markdown(this.text);
      else this.target.textContent = this.text;
      this.target.scrollTop = this.target.scrollHeight; // a chat window follows the answer (and forces a layout)
      this.renderMs += performance.now() - start;
      this.updates += 1;
      if (this.updates === 1 && this.text) afterPaint(() => this.mark("first-visible-text"), inFrame);
    }

    stop() { this.stopped = true; } // the naive stop button: the screen freezes, the request goes on

    // Resolves once the last scheduled render has painted.
    settled() {
      const pending = this.pending || Promise.resolve();
      return pending.then(() => new Promise((resolve) => afterPaint(resolve, false)));
    }
  }

  // -- one chat delta out of an event ----------------------------------------------------------------------------

  function handleEvent(event, result, renderer, mark) {
    result.events += 1;
    mark("first-event");
    if (event.data === "[DONE]") { result.doneEvents += 1; return; }
    let chunk;
    try { chunk = JSON.parse(event.data); } catch { return; }
    if (chunk && chunk.error) { result.error = "error in stream: " + (chunk.error.message || "?"); return; }
    const delta = chunk && chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
    if (delta && typeof delta.content === "string" && delta.content) {
      result.tokens += 1;
      state.tokens += 1;
      result.text += delta.content;
      mark("first-text");
      renderer.push(delta.content);
    }
  }

  function chatBody(model) {
    return JSON.stringify({model, stream: true, messages: [{role: "user", content: "Say something."}]});
  }

  // -- 1. fetch + ReadableStream + TextDecoderStream ----------------------------------------------------------

  async function readWithFetch(options, result, renderer, mark, signal) {
    mark("request-sent");
    const response = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: {"Authorization": "Bearer " + options.key, "Content-Type": "application/json", "Accept": "text/event-stream"},
      body: chatBody(options.model),
      signal, // abort() rejects the pending read and closes the connection: the server sees the client go
    });
    mark("response-headers");
    result.status = response.status;
    result.contentType = response.headers.get("content-type");
    if (!response.ok) {
      result.error = `HTTP ${response.status}: ${await response.text()}`;
      return;
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    const parser = new SSEParser();
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      mark("first-byte");
      for (const event of parser.feed(value)) handleEvent(event, result, renderer, mark);
    }
    mark("done");
  }

  // -- 2. EventSource: GET only, no headers of yours, reconnects on its own --------------------------------------

  function readWithEventSource(options, result, renderer, mark) {
    const query = new URLSearchParams({model: options.model, retry: String(options.retry), after_end: options.afterEnd});
    if (options.cookie) document.cookie = `streamlab_key=${encodeURIComponent(options.cookie)}; path=/; SameSite=Strict`;
    else if (options.key) query.set("key", options.key); // keys in URLs reach logs: the lab says why a cookie is better
    Object.assign(result, {opens: 0, errors: [], lastEventId: "", closedBy: null, readyState: null});
    return new Promise((resolve) => {
      mark("request-sent");
      const source = new EventSource("/v1/chat/stream?" + query);
      current.close = () => finish("stop button");
      const timer = setTimeout(() => finish("timeout"), options.timeoutMs);
      function finish(by) {
        if (result.closedBy) return;
        result.readyState = source.readyState; // 2 (CLOSED) when the browser gave up for good
        result.closedBy = by;
        source.close();
        clearTimeout(timer);
        mark("done");
        resolve();
      }
      source.onopen = () => {
        result.opens += 1;
        state.opens += 1;
        mark("open-" + result.opens);
        if (result.opens === 1) mark("response-headers");
      };
      source.onmessage = (message) => { // EventSource shows no chunks: its first event is the first thing seen
        result.lastEventId = message.lastEventId;
        handleEvent({type: message.type, data: message.data, id: message.lastEventId}, result, renderer, mark);
        if (message.data === "[DONE]") {
          mark("end-" + result.doneEvents);
          if (options.closeOnDone || result.doneEvents >= options.closeAfterDone) finish("page");
        }
      };
      source.onerror = () => {
        result.errors.push(source.readyState); // 0: reconnecting after `retry` ms; 2: failed for good
        mark("error-" + result.errors.length);
        if (source.readyState === EventSource.CLOSED) finish("browser");
      };
    });
  }

  // -- 3. a fetch-event-source-style client (modelled on @microsoft/fetch-event-source 2.0.1's fetch.ts) ---------

  function fetchEventSource(input, init) {
    const {signal, headers: inputHeaders, onopen, onmessage, onclose, onerror, openWhenHidden, fetch: fetchFn = fetch, ...rest} = init;
    return new Promise((resolve, reject) => {
      const headers = {...inputHeaders};
      if (!headers.accept) headers.accept = "text/event-stream";
      let controller;
      function onVisibilityChange() { // the library's default: hidden -> abort; visible -> send it all again
        controller.abort();
        if (!document.hidden) create();
      }
      if (!openWhenHidden) document.addEventListener("visibilitychange", onVisibilityChange);
      let retryInterval = 1000;
      let retryTimer = 0;
      function dispose() {
        document.removeEventListener("visibilitychange", onVisibilityChange);
        clearTimeout(retryTimer);
        controller.abort();
      }
      if (signal) signal.addEventListener("abort", () => { dispose(); resolve(); });
      async function create() {
        controller = new AbortController();
        try {
          const response = await fetchFn(input, {...rest, headers, signal: controller.signal});
          if (onopen) await onopen(response);
          const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
          const parser = new SSEParser();
          for (;;) {
            const {value, done} = await reader.read();
            if (done) break;
            for (const event of parser.feed(value)) {
              if (parser.lastEventId) headers["last-event-id"] = parser.lastEventId;
              else delete headers["last-event-id"];
              if (onmessage) onmessage(event);
            }
            if (parser.retry !== null) retryInterval = parser.retry;
          }
          if (onclose) onclose();
          dispose();
          resolve();
        } catch (err) {
          if (!controller.signal.aborted) { // an abort by visibilitychange is not an error: the library waits
            try {
              const interval = (onerror && onerror(err)) ?? retryInterval;
              clearTimeout(retryTimer);
              retryTimer = setTimeout(create, interval);
            } catch (fatal) {
              dispose();
              reject(fatal);
            }
          }
        }
      }
      create();
    });
  }

  async function readWithFetchEventSource(options, result, renderer, mark, signal) {
    Object.assign(result, {requests: 0, abortedWhileHidden: 0});
    const visibility = () => mark(document.hidden ? "hidden" : "shown");
    document.addEventListener("visibilitychange", visibility);
    const countingFetch = (input, init) => {
      result.requests += 1;
      state.requests += 1;
      mark(result.requests === 1 ? "request-sent" : "request-" + result.requests);
      init.signal.addEventListener("abort", () => { if (document.hidden) result.abortedWhileHidden += 1; });
      return fetch(input, init);
    };
    await fetchEventSource("/v1/chat/completions", {
      method: "POST",
      headers: {"Authorization": "Bearer " + options.key, "Content-Type": "application/json"},
      body: chatBody(options.model),
      fetch: countingFetch,
      signal,
      openWhenHidden: false, // the library's default
      async onopen(response) {
        mark("response-headers");
        result.status = response.status;
        result.contentType = response.headers.get("content-type");
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
      },
      onmessage(event) { mark("first-byte"); handleEvent(event, result, renderer, mark); },
      onerror(err) { throw err; }, // no retries on errors: only the visibility rule sends the request again
    }).finally(() => document.removeEventListener("visibilitychange", visibility));
    mark("done");
  }

  // -- one run, any transport ----------------------------------------------------------------------------------

  const state = {running: false, tokens: 0, opens: 0, requests: 0};
  const current = {controller: null, renderer: null, close: null, mark: null};

  const DEFAULTS = {
    transport: "fetch", model: "scheduled", key: "ada", cookie: "", render: "frame", markdown: true,
    retry: 1000, afterEnd: "stop", closeOnDone: true, closeAfterDone: 1, timeoutMs: 30000,
  };

  async function chat(given) {
    const options = {...DEFAULTS, ...given};
    const run = `run${++runs}`;
    const {mark, read} = marker(run);
    const renderer = new Renderer(document.getElementById("answer"), {mode: options.render, markdown: options.markdown, mark});
    const controller = new AbortController();
    const result = {
      run, transport: options.transport, model: options.model, render: options.render, status: null,
      contentType: null, events: 0, doneEvents: 0, tokens: 0, text: "", error: null, aborted: false,
      stoppedRendering: false,
    };
    Object.assign(state, {running: true, tokens: 0, opens: 0, requests: 0});
    Object.assign(current, {controller, renderer, close: null, mark});
    buttons(true);
    try {
      if (options.transport === "eventsource") await readWithEventSource(options, result, renderer, mark);
      else if (options.transport === "fetch-event-source") await readWithFetchEventSource(options, result, renderer, mark, controller.signal);
      else await readWithFetch(options, result, renderer, mark, controller.signal);
    } catch (err) {
      result.aborted = controller.signal.aborted;
      result.error = err.name === "AbortError" ? "AbortError" : String(err);
      mark(result.aborted ? "aborted" : "failed");
    }
    if (!renderer.stopped) await renderer.settled();
    Object.assign(result, {
      stoppedRendering: renderer.stopped, shown: document.getElementById("answer").textContent,
      updates: renderer.updates, renderMs: renderer.renderMs, marks: read(),
    });
    state.running = false;
    buttons(false);
    show(result);
    return result;
  }

  // Rendering measured: frames painted and long tasks (over 50 ms on the main thread) during one run.
  async function measureRendering(given) {
    const longTasks = [];
    const observer = new PerformanceObserver((list) => longTasks.push(...list.getEntries()));
    observer.observe({type: "longtask"});
    let frames = 0, counting = true;
    const tick = () => { if (counting) { frames += 1; requestAnimationFrame(tick); } };
    requestAnimationFrame(tick);
    const since = performance.now();
    const result = await chat({transport: "fetch", markdown: true, ...given});
    counting = false;
    await new Promise((resolve) => setTimeout(resolve, 100)); // long-task entries are delivered a little later
    longTasks.push(...observer.takeRecords());
    observer.disconnect();
    const mine = longTasks.filter((task) => task.startTime >= since);
    return Object.assign(result, {
      frames, longTasks: mine.length, longTaskMs: mine.reduce((sum, task) => sum + task.duration, 0),
      elapsedMs: performance.now() - since,
    });
  }

  // -- the page ----------------------------------------------------------------------------------------------------

  function buttons(running) {
    document.getElementById("send").disabled = running;
    document.getElementById("stop").disabled = !running;
    document.getElementById("stop-rendering").disabled = !running;
  }

  function show(result) {
    const rows = document.querySelector("#timeline tbody");
    rows.replaceChildren();
    for (const [step, ms] of Object.entries(result.marks).sort((a, b) => a[1] - b[1])) {
      const tr = rows.insertRow();
      tr.insertCell().textContent = step;
      const cell = tr.insertCell();
      cell.className = "ms";
      cell.textContent = ms.toFixed(1);
    }
    const log = document.getElementById("log");
    const item = document.createElement("li");
    const extra = result.transport === "eventsource" ? `, ${result.opens} open(s), errors at readyState ${result.errors.join(",")}`
      : result.transport === "fetch-event-source" ? `, ${result.requests} request(s)` : "";
    item.textContent = `${result.run} ${result.transport} ${result.model}: HTTP ${result.status}, ${result.events} events, ` +
      `${result.tokens} tokens, ${result.updates} DOM updates${extra}${result.error ? ", " + result.error : ""}`;
    log.prepend(item);
  }

  document.getElementById("stop").addEventListener("click", () => {
    if (current.mark) current.mark("stop-clicked");
    if (current.close) current.close();
    if (current.controller) current.controller.abort();
  });
  document.getElementById("stop-rendering").addEventListener("click", () => {
    if (current.mark) current.mark("stop-clicked");
    if (current.renderer) current.renderer.stop();
  });
  document.getElementById("ask").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = (id) => document.getElementById(id).value;
    chat({
      transport: value("transport"), model: value("model"), key: value("key"), render: value("render"),
      markdown: document.getElementById("markdown").checked, retry: Number(value("retry")) || 0,
      afterEnd: value("after-end"), closeOnDone: document.getElementById("close-on-done").checked,
    });
  });

  window.streamlab = {SSEParser, markdown, fetchEventSource, chat, measureRendering, state};
})();
