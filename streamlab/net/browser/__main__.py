"""`python -m streamlab.net.browser`: run lab 12's browser scenarios in headless Chromium, print the run as JSON (I/O).

    python -m streamlab.net.browser                       # one live run, JSON on stdout
    python -m streamlab.net.browser --output run.json     # and written to a file
    python -m streamlab.net.browser --output streamlab/data/browser/lab12.json   # re-record what lab 12 replays
    python -m streamlab.net.browser --recorded            # the recorded run lab 12 replays, no browser needed

Exit status 0 on a run, 3 when Chromium or Playwright is missing (the message on stderr says how to install it).
"""

from __future__ import annotations

import argparse
import json
import sys

from streamlab.net.browser.chromium import BrowserMissing
from streamlab.net.browser.run import load_recorded, run_browser_lab, save

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m streamlab.net.browser",
        description="Run lab 12's browser scenarios (fetch reader, EventSource, hidden tab, stop button, render "
        "batching) on a fresh stand-in in headless Chromium, and print the facts and timings as JSON.",
    )
    parser.add_argument("--output", metavar="PATH", help="also write the run to PATH (indented JSON)")
    parser.add_argument(
        "--chromium", metavar="PATH", help="the Chromium executable (default: $STREAMLAB_CHROMIUM or PATH)"
    )
    parser.add_argument(
        "--recorded", action="store_true", help="print the run recorded in the package instead (what lab 12 replays)"
    )
    args = parser.parse_args(argv)
    if args.recorded:
        print(json.dumps(load_recorded(), indent=1, ensure_ascii=False))
        return 0
    try:
        result = run_browser_lab(chromium=args.chromium)
    except BrowserMissing as exc:
        print(f"streamlab.net.browser: {exc}", file=sys.stderr)
        return 3
    if args.output:
        save(result, args.output)
    print(json.dumps(result, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
