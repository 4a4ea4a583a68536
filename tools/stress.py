"""Run the socket-using tests again and again under CPU load, and report every failure (standard library only).

    python3 dev.py stress [--runs N] [--hogs K] [--full] [-- PYTEST_ARGS...]

A flaky test is one whose result depends on timing, and timing only goes wrong when the machine is busy. This
script makes it busy on purpose: K processes spin on the CPU (default: one per core) while pytest runs the
tests marked `net` (every test that opens a socket, see tests/conftest.py) N times in a row, each run in a
fresh interpreter. It prints each run's failures as they happen and a summary at the end: which tests failed,
in how many of the runs. Exit status 0 only when every run passed.

Anything after `--` is handed to pytest, e.g. `-- tests/standin/test_standin.py -k stop` to hammer one test.

With `--full` each run is the whole of `python3 dev.py test` instead (ruff, the labs' output check, then
`pytest --nbval`: every unit test and every lab), which is what "green N runs out of N under load" means
for the README's command. A full run takes about 11 minutes on a quiet 2-core machine, so run several
checkouts side by side (each its own clone, `--hogs 0` on all but one) to get N runs in an afternoon.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FAILED_LINE = re.compile(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$")  # pytest's short summary (-rfE)


def hog(stop: Any) -> None:  # a multiprocessing.Event
    """Burn one core until told to stop (checking the flag only now and then, so the loop stays hot)."""
    x = 0
    while not stop.is_set():
        for _ in range(200_000):
            x = (x * 31 + 7) % 1_000_003


HUNG = -1  # our exit code for a run that outlived --run-timeout


def command_for(python: str, pytest_args: list[str], *, full: bool) -> list[str]:
    """The command one run executes: the net tests under pytest, or (`full`) the README's `python3 dev.py test`."""
    if full:
        return [python, str(ROOT / "dev.py"), "test", "-q", "-rfE", *pytest_args]
    return [python, "-m", "pytest", "-m", "net", "-q", "-rfE", *pytest_args]


def run_once(args: list[str], timeout: float, keep: Path | None = None) -> tuple[int, list[str], float, str]:
    """One run of `args` in a fresh interpreter; returns (exit code, failed test ids, seconds, last summary line).
    A failing run's whole log is copied to `keep` (tracebacks included) when given."""
    with tempfile.TemporaryDirectory(prefix="streamlab-stress-") as tmp:
        log = Path(tmp) / "pytest.log"
        started = time.monotonic()
        with log.open("w", encoding="utf-8") as out:
            try:
                code = subprocess.call(args, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
            except subprocess.TimeoutExpired:  # a hung test is a failure too (subprocess killed pytest)
                code = HUNG
        took = time.monotonic() - started
        text = log.read_text(encoding="utf-8", errors="replace")
        if code != 0 and keep is not None:
            keep.write_text(text, encoding="utf-8")
    failed = [m.group(1) for line in text.splitlines() if (m := FAILED_LINE.match(line))]
    summary = next((line.strip("= ") for line in reversed(text.splitlines()) if line.strip()), "")
    # 1 = tests failed; anything else (or a failure with no test named: ruff, the labs' output check) is shown
    if code not in (0, 1) or (code == 1 and not failed):
        print("\n".join(text.splitlines()[-30:]), flush=True)
    return code, failed, took, summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="dev.py stress", description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20, help="how many times to run the net tests (default 20)")
    ap.add_argument(
        "--hogs",
        type=int,
        default=os.cpu_count() or 2,
        help="CPU-hog processes running alongside (default: one per core)",
    )
    ap.add_argument(
        "--run-timeout",
        type=float,
        default=None,
        help="seconds before a run counts as hung (default 1800; 3600 with --full)",
    )
    ap.add_argument("--python", default=sys.executable, help="interpreter that runs pytest (default: this one)")
    ap.add_argument(
        "--logs",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep each failing run's whole log here as run-N.log (default: a new folder under /tmp)",
    )
    ap.add_argument(
        "--full",
        action="store_true",
        help="run the whole `python3 dev.py test` (every test and lab) instead of `pytest -m net`",
    )
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.hogs < 0:
        ap.error("--runs must be at least 1 and --hogs at least 0")

    logs = args.logs or Path(tempfile.mkdtemp(prefix="streamlab-stress-logs-"))
    logs.mkdir(parents=True, exist_ok=True)
    if args.run_timeout is None:
        args.run_timeout = 3600.0 if args.full else 1800.0
    stop = multiprocessing.Event()
    hogs = [multiprocessing.Process(target=hog, args=(stop,), name=f"hog-{i}", daemon=True) for i in range(args.hogs)]
    for p in hogs:
        p.start()

    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # a `kill` stops the hogs too (the finally below), not only Ctrl-C

    signal.signal(signal.SIGTERM, interrupted)  # after the hogs started: they keep the default, and just die
    argv_run = command_for(args.python, args.pytest_args, full=args.full)
    command = " ".join(["python3 dev.py test" if args.full else "pytest -m net", *args.pytest_args])
    print(
        f"stress: {args.runs} run(s) of `{command}` with {args.hogs} CPU hog(s) on {os.cpu_count()} core(s)", flush=True
    )
    failures: collections.Counter[str] = collections.Counter()
    bad_runs = 0
    broken = 0
    done = 0
    try:
        for i in range(1, args.runs + 1):
            code, failed, took, summary = run_once(argv_run, args.run_timeout, logs / f"run-{i}.log")
            done += 1
            failures.update(failed)
            bad_runs += code != 0
            broken += code != 0 and (code != 1 or not failed)
            verdict = (
                "ok"
                if code == 0
                else f"{len(failed)} failure(s)"
                if code == 1 and failed
                else f"hung: killed after {args.run_timeout:.0f} s"
                if code == HUNG
                else f"exited {code}"
            )
            print(f"run {i}/{args.runs}: {verdict} in {took:.0f} s ({summary})", flush=True)
            for test in failed:
                print(f"    {test}", flush=True)
            if code != 0:
                print(f"    log: {logs / f'run-{i}.log'}", flush=True)
    except KeyboardInterrupt:
        print("stress: interrupted", flush=True)
    finally:
        stop.set()
        for p in hogs:
            p.join(5)
            if p.is_alive():
                p.terminate()
                p.join()

    print(
        f"\nsummary: {done - bad_runs} of {done} run(s) clean"
        + (f" (interrupted: {args.runs - done} of the {args.runs} asked for never ran)" if done < args.runs else ""),
        flush=True,
    )
    for test, count in failures.most_common():
        print(f"  {count:>3}/{done}  {test}", flush=True)
    if broken:
        print(f"  {broken} run(s) that hung or where pytest itself failed (see above)", flush=True)
    return 0 if bad_runs == 0 and done == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
