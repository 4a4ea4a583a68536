"""streamlab's data set, shipped inside the package as `streamlab.data` (see pyproject.toml).

fixtures/  raw SSE byte files (`NAME.sse`) with hand-written expectations (`NAME.json`)
timings/   recorded client timings that labs plot when a live run would not be deterministic
browser/   a recorded run of lab 12's chat page in headless Chromium (`python -m streamlab.net.browser`)
quiz/      checkpoint questions, one file per lab

Read it with `streamlab.core.harness.fixtures.data_dir()` (or `importlib.resources.files("streamlab.data")`),
never with a path relative to the working directory.
"""
