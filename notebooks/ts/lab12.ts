/**
 * The checks of lab 12's exercises (the TypeScript lab): `check("12.K", answer)` prints one verdict line, as the
 * Python labs' `check` does, and never throws, so a lab with untouched stubs still runs top to bottom.
 *
 *     Exercise 12.1: passed
 *     Exercise 12.1: not attempted yet
 *     Exercise 12.1: not yet: <what is wrong>
 *
 * Each verdict (the word only) is kept in the learner's progress file through the environment's Python
 * (`streamlab progress` lists it). tests/labs/test_lab12.py runs every hidden solution of the lab through these checks.
 */
import { printed, recordVerdict } from "./streamlab.ts";

type Checker = (answer: unknown) => Promise<string | null> | string | null;

const enc = new TextEncoder();

/** Cut `bytes` into pieces of `size` bytes: most cuts of a multi-byte text fall inside a character. */
export function cut(bytes: Uint8Array, size: number): Uint8Array[] {
  const pieces: Uint8Array[] = [];
  for (let at = 0; at < bytes.length; at += size) pieces.push(bytes.slice(at, at + size));
  return pieces;
}

async function decodeAll(answer: unknown): Promise<string | null> {
  if (typeof answer !== "function") return "decodeAll should be a function (pieces: Uint8Array[]) => string";
  const texts = ["Grüße aus Köln 🙂", "naïve café, 東京, emoji 🧪🔬 and plain ASCII", "\u00e9".repeat(40)];
  for (const text of texts) {
    const bytes = enc.encode(text);
    for (const size of [1, 2, 3, 5, 7]) {
      let got: unknown;
      try {
        got = await answer(cut(bytes, size));
      } catch (error) {
        return `it threw on ${JSON.stringify(text)} cut every ${size} bytes: ${error}`;
      }
      if (got !== text) {
        return `on ${JSON.stringify(text)} cut every ${size} bytes it gave ${JSON.stringify(got)}`;
      }
    }
  }
  const again = await answer([enc.encode("ok")]);
  if (again !== "ok") return `a second call gave ${JSON.stringify(again)}: use a fresh decoder per call`;
  return null;
}

interface Call {
  id: string;
  name: string;
  arguments: string;
}

function toolChunk(index: number, fields: Record<string, unknown>): unknown {
  return { choices: [{ index: 0, delta: { tool_calls: [{ index, ...fields }] }, finish_reason: null }] };
}

async function rebuildToolCalls(answer: unknown): Promise<string | null> {
  if (typeof answer !== "function") return "rebuildToolCalls should be a function (chunks) => calls";
  const chunks = [
    { choices: [{ index: 0, delta: { role: "assistant", content: null }, finish_reason: null }] },
    toolChunk(0, { id: "call_a", type: "function", function: { name: "get_weather", arguments: "" } }),
    toolChunk(1, { id: "call_b", type: "function", function: { name: "get_time", arguments: "" } }),
    toolChunk(0, { function: { arguments: '{"ci' } }),
    toolChunk(1, { function: { arguments: '{"tz": "Eu' } }),
    toolChunk(0, { function: { arguments: 'ty": "Oslo"}' } }),
    toolChunk(1, { function: { arguments: 'rope/Oslo"}' } }),
    { choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] },
    { choices: [], usage: { prompt_tokens: 9, completion_tokens: 20, total_tokens: 29 } },
  ];
  const want: Call[] = [
    { id: "call_a", name: "get_weather", arguments: '{"city": "Oslo"}' },
    { id: "call_b", name: "get_time", arguments: '{"tz": "Europe/Oslo"}' },
  ];
  let got: unknown;
  try {
    got = await answer(structuredClone(chunks));
  } catch (error) {
    return `it threw: ${error} (the usage chunk has "choices": [])`;
  }
  if (!Array.isArray(got)) return `it returned ${JSON.stringify(got)}, not an array of calls`;
  const slim = got.map((c) => ({ id: c?.id, name: c?.name, arguments: c?.arguments }));
  if (JSON.stringify(slim) !== JSON.stringify(want)) {
    return `the interleaved fragments gave ${JSON.stringify(slim)}; expected ${JSON.stringify(want)}`;
  }
  return null;
}

async function idleTimeout(answer: unknown): Promise<string | null> {
  if (typeof answer !== "function") return "idleTimeout should be a function (ms) => { signal, touch }";
  const idle = answer(200) as { signal?: AbortSignal; touch?: () => void };
  if (!(idle?.signal instanceof AbortSignal) || typeof idle.touch !== "function") {
    return "idleTimeout(ms) should return { signal: AbortSignal, touch: () => void }";
  }
  for (let i = 0; i < 6; i++) {
    await new Promise((r) => setTimeout(r, 60));
    idle.touch();
  }
  if (idle.signal.aborted) return "it aborted although touch() was called every 60 ms (ms = 200)";
  const quiet = Date.now();
  await new Promise<void>((resolve) => {
    if (idle.signal!.aborted) resolve();
    idle.signal!.addEventListener("abort", () => resolve(), { once: true });
    setTimeout(resolve, 2000);
  });
  const waited = Date.now() - quiet;
  if (!idle.signal.aborted) return "no abort 2 s after the last touch() (ms = 200)";
  if (waited < 150) return `it aborted ${waited} ms after the last touch(), before the 200 ms idle deadline`;
  const reason = idle.signal.reason;
  if (!(reason instanceof DOMException) || reason.name !== "TimeoutError") {
    return `abort with a DOMException named "TimeoutError" (as AbortSignal.timeout does), not ${reason}`;
  }
  return null;
}

const CHECKS: Record<string, [string, Checker]> = {
  "12.1": ["decodeAll", decodeAll],
  "12.2": ["rebuildToolCalls", rebuildToolCalls],
  "12.3": ["idleTimeout", idleTimeout],
};

/** Check exercise `id` ("12.K") against `answer` and print one verdict line; never throws. */
export async function check(id: string, answer: unknown): Promise<void> {
  let line: string;
  let word: string;
  if (!(id in CHECKS)) {
    line = `Exercise ${id}: no such exercise (lab 12 has ${Object.keys(CHECKS).join(", ")})`;
    word = "";
  } else if (answer === undefined || answer === null) {
    line = `Exercise ${id}: not attempted yet`;
    word = "not attempted";
  } else {
    let problem: string | null;
    try {
      problem = await CHECKS[id][1](answer);
    } catch (error) {
      problem = `the check itself failed on your answer: ${error}`;
    }
    line = problem === null ? `Exercise ${id}: passed` : `Exercise ${id}: not yet: ${problem}`;
    word = problem === null ? "passed" : "not yet";
  }
  if (word) await recordVerdict(id, word);
  console.log(line);
  await printed();
}
