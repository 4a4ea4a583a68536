"""Lab 12, the TypeScript lab: its hidden solutions pass its checks, its check cells match them, and its support
module runs, all in the real Deno of the environment (the `deno` package of the lab extra).

The Python labs' solutions go through tests/labs/test_solutions.py; lab 12's are TypeScript, so each is pulled out of
the notebook's Markdown and run by `deno` against `notebooks/ts/lab12.ts`, the module the lab's check cells use.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "notebooks" / "12-typescript-and-the-browser.ipynb"
SOLUTION = re.compile(r"<summary>\s*Solution\s+(12\.\d+)\s*</summary>.*?```ts\n(.*?)```", re.S)
DENO = Path(sys.executable).parent / "deno"


def _cells() -> list[dict]:
    return json.loads(LAB.read_text(encoding="utf-8"))["cells"]


def _solutions() -> dict[str, str]:
    return {
        ex_id: code
        for cell in _cells()
        if cell["cell_type"] == "markdown"
        for ex_id, code in SOLUTION.findall("".join(cell["source"]))
    }


def _deno(script: str, tmp_path: Path) -> str:
    if not DENO.exists():
        pytest.fail(f"Deno is missing from {DENO.parent} (the `deno` package of the lab extra): lab 12 cannot run")
    path = ROOT / "notebooks" / f".test-lab12-{tmp_path.name}.ts"  # next to ts/, so its imports and deno.json apply
    path.write_text(script, encoding="utf-8")
    try:
        done = subprocess.run(
            [str(DENO), "run", "--allow-all", "--quiet", str(path)],
            cwd=ROOT / "notebooks",
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        path.unlink()
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_check_cell_has_a_hidden_solution_and_a_stub() -> None:
    code = "\n".join("".join(c["source"]) for c in _cells() if c["cell_type"] == "code")
    called = re.findall(r'^await check\("(12\.\d+)", (\w+)\);$', code, re.M)
    assert [ex_id for ex_id, _ in called] == ["12.1", "12.2", "12.3"]
    assert sorted(_solutions()) == ["12.1", "12.2", "12.3"]
    for _, name in called:
        assert re.search(rf"^let {name}: .* = undefined;$", code, re.M), f"no stub for {name}"


@pytest.mark.net
def test_each_hidden_solution_passes_its_check_and_a_wrong_answer_does_not(tmp_path: Path) -> None:
    code = "\n".join("".join(c["source"]) for c in _cells() if c["cell_type"] == "code")
    stubs = re.findall(r"^let (\w+): (.*) = undefined;$", code, re.M)  # (name, type), in the order of 12.1-12.3
    lines = ['import { check } from "./ts/lab12.ts";']
    for ex_id, (name, type_) in zip(sorted(_solutions()), stubs):
        lines += [f"{{ let {name}: {type_} = undefined;", _solutions()[ex_id], f'await check("{ex_id}", {name}); }}']
    # wrong answers: decoding each piece alone, calls joined by arrival order, a timer that is never reset
    lines += [
        'await check("12.1", (p: Uint8Array[]) => p.map((x) => new TextDecoder().decode(x)).join(""));',
        'await check("12.2", (chunks: any[]) => chunks.flatMap((c) => c.choices?.[0]?.delta?.tool_calls ?? [])'
        ".map((t: any) => ({ id: t.id, name: t.function?.name, arguments: t.function?.arguments })));",
        'await check("12.3", (ms: number) => ({ signal: AbortSignal.timeout(ms), touch: () => {} }));',
        'await check("12.1", undefined);',
    ]
    out = _deno("\n".join(lines), tmp_path).splitlines()
    assert out[:3] == ["Exercise 12.1: passed", "Exercise 12.2: passed", "Exercise 12.3: passed"], out
    assert all(line.startswith(f"Exercise 12.{k}: not yet: ") for k, line in zip((1, 2, 3), out[3:6])), out
    assert out[6] == "Exercise 12.1: not attempted yet"


@pytest.mark.net
def test_the_support_module_serves_the_stand_in_and_reads_its_records(tmp_path: Path) -> None:
    script = """
import { serve } from "./ts/streamlab.ts";
const server = await serve();
const again = await serve(); // a re-run replaces the first server
const res = await fetch(`${again.url}/chat/completions`, {
  method: "POST",
  headers: { "Authorization": "Bearer ts-test", "Content-Type": "application/json" },
  body: JSON.stringify({ model: "length", stream: true, messages: [{ role: "user", content: "hi" }] }),
});
await res.text();
const [record] = await again.waitFor("ts-test");
let first = "refused";
try { await fetch(`${server.url}/chat/completions`); first = "still serving"; } catch { /* stopped */ }
console.log(JSON.stringify({ record, first, same: server.url === again.url }));
await again.stop();
"""
    got = json.loads(_deno(script, tmp_path).strip().splitlines()[-1])
    assert got["record"]["model"] == "length" and got["record"]["ending"] == "complete"
    assert got["record"]["status"] == "200" and got["record"]["bytes"] > 0
    assert got["first"] == "refused", "the first stand-in was not stopped when the cell ran again"
