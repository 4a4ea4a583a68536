/**
 * streamlab for the TypeScript lab (lab 12, on the Deno kernel): the same stand-in, progress file and quiz as the
 * Python labs, reached from TypeScript.
 *
 * Nothing here is the lesson: the lab writes its SSE reader, its deadlines and its tool-call rebuild by hand. This
 * module only starts and stops the Python stand-in (`streamlab standin`) as a child process, reads the line it
 * prints for every finished request (its records), and shows the lab's checkpoint quiz. The Python comes from the
 * environment Deno was installed into (`pip install deno` puts `deno` next to `python`), or STREAMLAB_PYTHON.
 */

/** The Python interpreter of the environment this Deno lives in (where streamlab is installed). */
export function python(): string {
  const given = Deno.env.get("STREAMLAB_PYTHON");
  if (given) return given;
  const exe = Deno.execPath();
  const dir = exe.slice(0, Math.max(exe.lastIndexOf("/"), exe.lastIndexOf("\\")) + 1);
  return dir + (Deno.build.os === "windows" ? "python.exe" : "python");
}

/** One finished request, as the stand-in's console line tells it. */
export interface StandInRecord {
  method: string;
  path: string;
  model: string;
  status: string;
  ending: string;
  bytes: number;
  learner: string;
  /** Any other `key=value` field the line carries (such as the Last-Event-ID a reconnect sent). */
  extra: Record<string, string>;
}

const RECORD = /^ {2}([A-Z]+) (\S+) model=(\S*) status=(\S+) (\S+) (\d+) bytes learner=(\S+)(.*)$/;

/** Read one console line of the stand-in; null for a line that is not a record. */
export function parseRecord(line: string): StandInRecord | null {
  const m = RECORD.exec(line);
  if (!m) return null;
  const extra: Record<string, string> = {};
  for (const field of m[8].trim().split(/\s+/)) {
    const at = field.indexOf("=");
    if (at > 0) extra[field.slice(0, at)] = field.slice(at + 1);
  }
  return {
    method: m[1],
    path: m[2],
    model: m[3],
    status: m[4],
    ending: m[5],
    bytes: Number(m[6]),
    learner: m[7],
    extra,
  };
}

// The child stops itself when its stdin closes (the kernel died or restarted), then as on Ctrl-C: no orphan server.
const WATCHDOG = [
  "import os, signal, sys, threading, runpy",
  "def _watch():",
  "    sys.stdin.buffer.read()",
  "    os.kill(os.getpid(), signal.SIGINT)",
  "threading.Thread(target=_watch, daemon=True).start()",
  "sys.argv = ['streamlab', 'standin', *sys.argv[1:]]",
  "runpy.run_module('streamlab', run_name='__main__', alter_sys=True)",
].join("\n");

/** A running stand-in: its base URL (`.../v1`), its records, and a way to stop it. */
export class StandIn {
  readonly records: StandInRecord[] = [];
  #waiters: Array<() => void> = [];

  constructor(
    readonly url: string,
    readonly origin: string,
    private readonly child: Deno.ChildProcess,
    private readonly stdin: WritableStreamDefaultWriter<Uint8Array>,
  ) {}

  /** Called by `serve()` for each line the stand-in prints. */
  take(line: string): void {
    const record = parseRecord(line);
    if (record === null) return;
    this.records.push(record);
    for (const wake of this.#waiters.splice(0)) wake();
  }

  /** The records of one learner (API key), optionally of one model, in the order the requests finished. */
  of(learner: string, model?: string): StandInRecord[] {
    return this.records.filter((r) => r.learner === learner && (model === undefined || r.model === model));
  }

  /** Wait until `learner` has at least `count` finished requests (a server notes a request once it has ended,
   * which can be a moment after the client has moved on); throws after `timeoutMs`. */
  async waitFor(learner: string, count = 1, timeoutMs = 5000): Promise<StandInRecord[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.of(learner).length < count) {
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(`the stand-in finished ${this.of(learner).length} of ${count} requests of ${learner}`);
      }
      let timer = 0;
      await new Promise<void>((wake) => {
        this.#waiters.push(wake);
        timer = setTimeout(wake, left);
      });
      clearTimeout(timer);
    }
    return this.of(learner);
  }

  /** Stop the server (as Ctrl-C does) and wait for its process to end. */
  async stop(): Promise<void> {
    try {
      await this.stdin.close();
    } catch {
      // already closed
    }
    const ended = await Promise.race([
      this.child.status.then(() => true),
      new Promise<boolean>((r) => setTimeout(() => r(false), 5000)),
    ]);
    if (!ended) {
      this.child.kill("SIGKILL");
      await this.child.status;
    }
  }
}

declare global {
  // One stand-in per kernel, like the Python labs' `serve()`: re-running the cell replaces it.
  var __streamlabStandIn: StandIn | undefined;
}

/** Start the stand-in on 127.0.0.1 (a free port) serving `scenario` ("all": every scripted model), after stopping
 * the one an earlier run of the cell started, so re-running a cell never leaks a server. */
export async function serve(scenario = "all"): Promise<StandIn> {
  await globalThis.__streamlabStandIn?.stop();
  globalThis.__streamlabStandIn = undefined;
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(python(), {
      args: ["-u", "-c", WATCHDOG, "--scenario", scenario, "--port", "0", "--host", "127.0.0.1"],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (error) {
    throw new Error(
      `could not start the stand-in with ${python()} (${error}). Lab 12 runs the Python stand-in of the ` +
        `environment that holds Deno: run \`python3 dev.py lab\` from the project root, or set STREAMLAB_PYTHON.`,
    );
  }
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).pipeThrough(splitLines());
  const reader = lines.getReader();
  const banner: string[] = [];
  let url = "";
  while (!url) {
    const { value, done } = await reader.read();
    if (done) {
      const err = await new Response(child.stderr).text();
      throw new Error(`the stand-in exited before serving:\n${banner.join("\n")}\n${err}`);
    }
    banner.push(value);
    url = /at (http:\/\/127\.0\.0\.1:\d+\/v1)/.exec(value)?.[1] ?? "";
  }
  child.stderr.cancel();
  const server = new StandIn(url, url.slice(0, -"/v1".length), child, child.stdin.getWriter());
  (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      server.take(value);
    }
  })();
  globalThis.__streamlabStandIn = server;
  return server;
}

/** Split decoded text into lines ("\n" or "\r\n"), across chunk boundaries. */
function splitLines(): TransformStream<string, string> {
  let rest = "";
  return new TransformStream({
    transform(text, out) {
      const parts = (rest + text).split(/\r?\n/);
      rest = parts.pop() ?? "";
      for (const line of parts) out.enqueue(line);
    },
    flush(out) {
      if (rest) out.enqueue(rest);
    },
  });
}

/** Run the environment's Python with `args` and return what it printed (throws with its stderr on failure). */
export async function runPython(args: string[]): Promise<string> {
  const done = await new Deno.Command(python(), { args, stdout: "piped", stderr: "piped" }).output();
  const dec = new TextDecoder();
  if (!done.success) throw new Error(`${python()} ${args.join(" ")} failed:\n${dec.decode(done.stderr)}`);
  return dec.decode(done.stdout);
}

/** Lab 12's checkpoint quiz: the questions and their choices, as HTML and as text (never an answer). */
export async function quiz(lab: string): Promise<void> {
  const code = "import json, sys; from streamlab.tools.quizview import quiz_html, quiz_text; " +
    "print(json.dumps({'text/html': quiz_html(sys.argv[1]), 'text/plain': quiz_text(sys.argv[1])}))";
  const bundle = JSON.parse(await runPython(["-c", code, lab]));
  await Deno.jupyter.display(bundle, { raw: true });
  await printed();
}

/** The quiz's answers, each with why and the section that teaches it: only when you ask. */
export async function quizAnswers(lab: string): Promise<void> {
  console.log(await runPython(["-m", "streamlab", "quiz", lab, "--answers"]));
  await printed();
}


/** Keep one exercise's verdict (the word only) in the learner's progress file, as the Python labs' check cells do. */
export async function recordVerdict(exercise: string, verdict: string): Promise<void> {
  const code = "import sys; from streamlab.net.progress import record_verdict; record_verdict(sys.argv[1], sys.argv[2])";
  try {
    await runPython(["-c", code, exercise, verdict]);
  } catch {
    // progress is a convenience: a check's verdict is printed whether or not it could be kept
  }
}

/** Wait until everything this cell printed has reached the notebook. The Deno kernel forwards `console.log`
 * output from its event loop, after the code that printed it; a cell that ends right after printing can be
 * reported finished first, and its last lines then miss the cell (denoland/deno#20337 describes the kernel's
 * stdout path). Two turns of the event loop let the forwarding run. Lab 12's cells that print end with it. */
export async function printed(): Promise<void> {
  for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setTimeout(resolve, 0));
}
