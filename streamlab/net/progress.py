"""Progress on disk and to a room: each check cell's verdict kept in a JSON file, and sent on if joined (I/O layer).

Every verdict goes to a small file on the learner's machine and, for a learner who joined a room, to the room's
stand-in.

`streamlab.exercises.check` calls `record_verdict(exercise, verdict)` after printing its verdict line. That
writes the verdict, its time and the exercise's last pass (never the answer: `streamlab.core.progress` decides
the format) to `~/.streamlab/progress.json`, or to the file named by the environment variable
`STREAMLAB_PROGRESS` (`off` records nothing: the test suite and the canonical notebook runs point it at a
temporary file). The write is atomic (a temporary file in the same folder, flushed, then renamed over the old
one) and, on POSIX, made under an advisory lock, so two kernels checking at once never leave half a file or
lose each other's verdict. A file that is not a progress file is moved aside to `progress.json.corrupt`, and
a recording that fails for any reason fails silently: a check cell must never raise.

A learner in a room joins it with one line in a lab's setup cell:

    join_room("http://192.168.1.23:8000", name="ada")

and from then on every verdict is also POSTed to the room's stand-in (`/v1/progress`, with the name as the
API key, so it lands in the learner's row of the dashboard). The POSTs go out from one background thread, each
with a short timeout, so a check cell never waits for the network; a room that cannot be reached costs
nothing but the verdicts it misses (`RoomLink` counts what was sent, what failed and why). Calling
`join_room` again replaces the link, so re-running the setup cell never leaks a thread; `leave_room()` ends it.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import tempfile
import threading
from collections import deque
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from streamlab.core.progress import (
    EXERCISE_ID,
    PROGRESS_PATH,
    VERDICTS,
    Entry,
    dump_progress,
    load_catalogue,
    parse_progress,
    progress_table,
    recorded,
)

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; the atomic rename still protects the file itself
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "ENV",
    "progress_file",
    "read_progress",
    "record_verdict",
    "reset_progress",
    "progress_report",
    "RoomLink",
    "join_room",
    "leave_room",
    "current_room",
    "DEFAULT_TIMEOUT",
]

ENV = "STREAMLAB_PROGRESS"
"""The environment variable naming the progress file (`off`: record nothing)."""
DEFAULT_TIMEOUT = 2.0
"""Seconds a verdict's POST to the room may take (connect, send, answer) before it counts as failed."""
_MAX_PENDING = 256  # verdicts waiting for the room: past this, new ones are dropped (and counted)
_lock = threading.Lock()  # one kernel's threads record one at a time; the file lock covers other processes


def progress_file() -> Path | None:
    """Where verdicts are kept: $STREAMLAB_PROGRESS, or ~/.streamlab/progress.json; None when set to `off`."""
    named = os.environ.get(ENV, "").strip()
    if named.lower() == "off":
        return None
    return Path(named).expanduser() if named else Path.home() / ".streamlab" / "progress.json"


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_progress(path: Path | None = None) -> dict[str, Entry]:
    """The recorded verdicts ({} when there is no file, recording is off, or the file is not a progress file)."""
    path = path if path is not None else progress_file()
    if path is None:
        return {}
    try:
        return parse_progress(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold this process's lock and, on POSIX, an advisory lock on `path`'s lock file beside it."""
    with _lock:
        if fcntl is None:
            yield
            return
        with open(path.with_name(path.name + ".lock"), "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _write_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text` in one rename: a reader sees the old file or the new one, never half."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _record(path: Path, exercise: str, verdict: str, at: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = None
        try:
            progress = parse_progress(text) if text is not None else {}
        except ValueError:  # not a progress file: keep it aside rather than lose it, and start a new one
            os.replace(path, path.with_name(path.name + ".corrupt"))
            progress = {}
        _write_atomically(path, dump_progress(recorded(progress, exercise, verdict, at)))


def record_verdict(exercise: str, verdict: str, *, path: Path | None = None) -> bool:
    """Keep one check cell's verdict (and send it to the room joined, if any). Never raises: True when it was
    written, False when recording is off or failed (a read-only home, a full disk, a bad id)."""
    if verdict not in VERDICTS or not isinstance(exercise, str) or not EXERCISE_ID.fullmatch(exercise):
        return False
    room = current_room()
    if room is not None:
        room.send(exercise, verdict)
    path = path if path is not None else progress_file()
    if path is None:
        return False
    try:
        _record(path, exercise, verdict, _now())
    except Exception:  # noqa: BLE001 - a check cell must never raise because its verdict could not be kept
        return False
    return True


def reset_progress(path: Path | None = None) -> bool:
    """Forget every recorded verdict (remove the file); True when there was one."""
    path = path if path is not None else progress_file()
    if path is None:
        return False
    with _locked(path) if path.parent.is_dir() else contextlib.nullcontext():
        try:
            path.unlink()
        except FileNotFoundError:
            return False
    return True


def progress_report(path: Path | None = None) -> str:
    """The progress table of every lab's exercises (what `streamlab progress` and the labs' index print)."""
    return progress_table(read_progress(path), load_catalogue())


# --- the room ---------------------------------------------------------------------------------------------


def _room_root(url: str) -> str:
    """The stand-in's root URL from what a learner types: http://HOST:PORT, with or without / or /v1."""
    root = url.strip().rstrip("/")
    root = root.removesuffix("/v1")
    if not root.startswith(("http://", "https://")) or len(root.split("//", 1)[1]) == 0:
        raise ValueError(
            f"the room's URL starts with http:// and names its host, such as http://192.168.1.23:8000; got {url!r}"
        )
    return root


class RoomLink:
    """Verdicts on their way to one room's stand-in: queued by `send` (which never blocks), POSTed by one
    background thread with `timeout` seconds each. `sent`, `failed`, `dropped` and `last_error` say how it
    goes; `flush` waits for the queue to empty; `close` ends the thread."""

    def __init__(self, url: str, name: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        if not isinstance(name, str) or not name.strip() or len(name) > 200 or not name.isprintable():
            raise ValueError(
                "name is how the room knows you (your API key there): a short printable string, "
                f"such as your first name; got {name!r}"
            )
        if not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.url = _room_root(url) + PROGRESS_PATH
        self.name = name.strip()
        self.timeout = timeout
        self.sent = self.failed = self.dropped = 0
        self.last_error: str | None = None
        self._pending: deque[dict[str, str]] = deque()
        self._busy = False
        self._closed = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="streamlab-room", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return (
            f"RoomLink({self.url!r}: {self.sent} verdict(s) sent, {self.failed} failed"
            + (f", {self.dropped} dropped" if self.dropped else "")
            + (f"; last error: {self.last_error}" if self.last_error else "")
            + ")"
        )

    def send(self, exercise: str, verdict: str) -> bool:
        """Queue one verdict for the room (False, and counted as dropped, when too many are waiting)."""
        with self._cond:
            if self._closed:
                return False
            if len(self._pending) >= _MAX_PENDING:
                self.dropped += 1
                return False
            self._pending.append({"exercise": exercise, "verdict": verdict})
            self._cond.notify_all()
            return True

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every queued verdict has been POSTed (or has failed); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)

    def close(self, timeout: float = 1.0) -> None:
        """Give queued verdicts up to `timeout` seconds, then stop the thread (idempotent)."""
        self.flush(timeout)
        with self._cond:
            self._closed = True
            self._pending.clear()
            self._cond.notify_all()
        self._thread.join(timeout + self.timeout)

    def _next(self) -> dict[str, str] | None:
        with self._cond:
            self._cond.wait_for(lambda: self._pending or self._closed)
            if self._closed:
                return None
            self._busy = True
            return self._pending.popleft()

    def _run(self) -> None:
        try:
            self._serve()
        except Exception as exc:  # noqa: BLE001 - never a traceback from this thread (it would land in a cell)
            with self._cond:
                self._closed, self._busy = True, False
                self.last_error = f"the room's thread stopped: {type(exc).__name__}: {exc}"[:300]
                self._pending.clear()
                self._cond.notify_all()

    def _serve(self) -> None:
        import httpx  # here, in the thread: `import streamlab.exercises` stays light

        headers = {"Authorization": f"Bearer {self.name}", "User-Agent": "streamlab-progress"}
        with httpx.Client(timeout=self.timeout, headers=headers) as client:
            while (item := self._next()) is not None:
                error = _post(client, self.url, item)
                with self._cond:
                    self._busy = False
                    if error is None:
                        self.sent += 1
                    else:
                        self.failed += 1
                        self.last_error = error
                    self._cond.notify_all()


def _post(client: Any, url: str, item: dict[str, str]) -> str | None:
    """POST one verdict; None when the room took it, else what went wrong (one short line)."""
    try:
        reply = client.post(url, json=item)
    except Exception as exc:  # noqa: BLE001 - connect errors, timeouts, anything: counted, never raised
        return f"{type(exc).__name__}: {exc}"[:300]
    if reply.status_code == 200:
        return None
    try:
        message = reply.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = reply.text
    return f"HTTP {reply.status_code}: {json.dumps(message)[:300]}"


_room: RoomLink | None = None
_room_lock = threading.Lock()


def join_room(url: str, *, name: str, timeout: float = DEFAULT_TIMEOUT) -> RoomLink:
    """Send every later verdict to the room's stand-in at `url` too, as learner `name` (your API key in the
    room). Replaces the link a previous call made. Nothing is sent now: the next check cell sends its verdict."""
    global _room
    link = RoomLink(url, name, timeout=timeout)
    with _room_lock:
        old, _room = _room, link
    if old is not None:
        old.close()
    return link


def leave_room() -> None:
    """Stop sending verdicts to a room (after giving the queued ones a second)."""
    global _room
    with _room_lock:
        old, _room = _room, None
    if old is not None:
        old.close()


def current_room() -> RoomLink | None:
    """The room joined, or None."""
    return _room


atexit.register(leave_room)
