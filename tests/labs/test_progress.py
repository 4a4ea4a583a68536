"""Progress: the verdicts check cells keep (core format, the file on disk, `streamlab progress`) and send to a room.

The pure half (`streamlab.core.progress`) is checked on plain values; the recorder (`streamlab.net.progress`) on a
file in a temporary folder named by STREAMLAB_PROGRESS, as the learner's machine would hold it; the room link
against a real stand-in on 127.0.0.1, a closed port and a server that never answers. The dashboard's view of
the verdicts (three learners, read from its live feed) is in tests/standin/test_dashboard.py.
"""

from __future__ import annotations

import importlib
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import free_port

from streamlab.core.progress import (
    MAX_VERDICT_BYTES,
    PROGRESS_PATH,
    VERDICTS,
    Entry,
    ExerciseVerdict,
    dump_progress,
    load_catalogue,
    parse_progress,
    progress_document,
    progress_table,
    read_verdict,
    recorded,
)
from streamlab.core.standin.plan import plan
from streamlab.core.standin.request import Request, parse_head
from streamlab.core.standin.room import Room
from streamlab.exercises import check, labs_with_exercises, registry
from streamlab.net import progress as recorder
from streamlab.tools.cli.main import main as cli

ROOT = Path(__file__).resolve().parents[2]
T1, T2, T3 = "2026-11-29T10:31:07Z", "2026-11-29T10:35:00Z", "2026-11-29T11:02:59Z"


@pytest.fixture
def progress_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh progress file (not yet written) named by STREAMLAB_PROGRESS, as a learner's machine would have it."""
    path = tmp_path / "home" / ".streamlab" / "progress.json"
    monkeypatch.setenv(recorder.ENV, str(path))
    return path


# -- the core: verdicts, the file format, the catalogue, the table -------------------------------------------


def test_a_room_verdict_is_an_exercise_id_and_one_of_three_words():
    assert read_verdict({"exercise": "03.2", "verdict": "passed", "extra": 1}) == ExerciseVerdict("03.2", "passed")
    for word in VERDICTS:
        assert read_verdict({"exercise": "10.12", "verdict": word}) == ExerciseVerdict("10.12", word)
    for body in (
        [],
        "passed",
        {"exercise": "3.2", "verdict": "passed"},
        {"exercise": "03.2x", "verdict": "passed"},
        {"exercise": "03.2", "verdict": "PASSED"},
        {"exercise": "03.2"},
        {"verdict": "passed"},
        {"exercise": 3.2, "verdict": "passed"},
        {"exercise": "03.2\n", "verdict": "passed"},
    ):
        assert isinstance(read_verdict(body), str), body


def test_recording_keeps_the_last_verdict_and_the_last_pass():
    p = recorded({}, "01.2", "not yet", T1)
    assert p == {"01.2": Entry("not yet", T1, None)}
    p = recorded(p, "01.2", "passed", T2)
    p = recorded(p, "01.2", "not attempted", T3)  # the stub put back and run again: the pass is not forgotten
    assert p["01.2"] == Entry("not attempted", T3, T2)
    with pytest.raises(ValueError):
        recorded(p, "1.2", "passed", T1)
    with pytest.raises(ValueError):
        recorded(p, "01.2", "ok", T1)


def test_the_file_holds_verdicts_and_times_only_and_reads_back():
    p = recorded(recorded(recorded({}, "10.1", "passed", T1), "01.2", "not yet", T2), "02.1", "passed", T3)
    text = dump_progress(p)
    doc = json.loads(text)
    assert doc == {
        "format": 1,
        "exercises": {
            "01.2": {"verdict": "not yet", "at": T2, "passed_at": None},
            "02.1": {"verdict": "passed", "at": T3, "passed_at": T3},
            "10.1": {"verdict": "passed", "at": T1, "passed_at": T1},
        },
    }
    assert list(doc["exercises"]) == ["01.2", "02.1", "10.1"]  # in exercise order, not the order recorded
    assert parse_progress(text) == p
    assert parse_progress(dump_progress({})) == {}


def test_a_file_that_is_not_a_progress_file_is_refused_and_a_bad_entry_skipped():
    for text in ("", "{", "[]", '{"format": 2, "exercises": {}}', '{"format": 1}', "\ufeff{}"):
        with pytest.raises(ValueError):
            parse_progress(text)
    text = json.dumps(
        {
            "format": 1,
            "exercises": {
                "01.1": {"verdict": "passed", "at": T1, "passed_at": T1},
                "01.2": {"verdict": "maybe", "at": T1},  # not a verdict
                "xx": {"verdict": "passed", "at": T1},  # not an id
                "01.3": {"verdict": "passed", "at": 7},  # not a time stamp
                "01.4": "passed",
            },
        }
    )
    assert parse_progress(text) == {"01.1": Entry("passed", T1, T1)}


def test_the_catalogue_lists_every_registered_exercise_of_every_lab():
    for lab in labs_with_exercises():
        importlib.import_module(f"streamlab.exercises.lab{lab}")
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import exercise_catalogue
    finally:
        sys.path.remove(str(ROOT / "tools"))
    typescript = exercise_catalogue.typescript_exercises()
    assert typescript == {"12": {"12.1": "decodeAll", "12.2": "rebuildToolCalls", "12.3": "idleTimeout"}}
    catalogue = load_catalogue()
    listed = {ex: name for lab in catalogue for ex, name in lab.exercises}
    expected = {ex: e.name for ex, e in registry().items()} | {
        ex: n for lab in typescript.values() for ex, n in lab.items()
    }
    assert listed == expected, "run tools/exercise_catalogue.py --write"
    assert [lab.lab for lab in catalogue] == sorted([*labs_with_exercises(), *typescript])
    for lab in catalogue:  # a lab whose checkers came before its notebook has none yet
        assert lab.notebook is None or (ROOT / "notebooks" / lab.notebook).is_file()
        assert lab.notebook is None or lab.notebook.startswith(lab.lab + "-")
        assert lab.title and not lab.title.startswith("Lab ")
    committed = (ROOT / "streamlab" / "data" / "exercises.json").read_text(encoding="utf-8")
    assert committed == exercise_catalogue.text(), (
        "data/exercises.json is out of date: run tools/exercise_catalogue.py --write"
    )


def test_the_table_lists_every_exercise_passed_or_not():
    catalogue = load_catalogue()
    p = recorded(recorded({}, "01.2", "passed", T1), "01.2", "not yet", T2)
    p = recorded(recorded(p, "03.1", "passed", T3), "04.1", "not attempted", T3)
    table = progress_table(p, catalogue)
    lines = table.splitlines()
    everything = [ex for lab in catalogue for ex, _ in lab.exercises]
    for ex in everything:
        assert sum(line.startswith(f"  {ex} ") for line in lines) == 1, ex
    assert "Lab 01: Server-Sent Events, byte by byte  (0 of 6 passed)" in lines
    assert any(line.startswith("Lab 03: ") and line.endswith("(1 of 3 passed)") for line in lines)
    row = next(line for line in lines if line.startswith("  01.2 "))
    assert "answer_2" in row and "not yet" in row and "2026-11-29 10:35 UTC" in row
    assert row.endswith("(passed 2026-11-29 10:31 UTC)")
    assert next(line for line in lines if line.startswith("  01.1 ")).endswith(" -")  # never checked
    assert lines[-1] == (
        f"{len(everything)} exercises: 1 passed, 1 not yet, 1 not attempted, {len(everything) - 3} never checked"
    )
    doc = progress_document(p, catalogue)
    assert [r["id"] for r in doc["exercises"]] == everything
    assert doc["counts"] == {
        "exercises": len(everything),
        "passed": 1,
        "not yet": 1,
        "not attempted": 1,
        "never checked": len(everything) - 3,
    }
    later = progress_document(recorded(p, "42.1", "passed", T1), catalogue)  # a lab this catalogue does not know
    assert later["exercises"][-1] == {
        "id": "42.1",
        "lab": "42",
        "name": None,
        "verdict": "passed",
        "at": T1,
        "passed_at": T1,
    }


# -- the recorder: what a check cell leaves on disk ------------------------------------------------------------


def test_a_check_cell_records_its_verdict_and_never_the_answer(progress_file: Path, capsys):
    secret = "my-private-answer-7f3c"
    check("01.1", ...)
    check("01.1", [("message", secret)])
    check("01.2", [("x", "1")])  # right
    check("09.9", secret)  # a typo in the check cell: no such exercise, nothing recorded
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "Exercise 01.1: not attempted yet" and printed[2] == "Exercise 01.2: passed"
    assert printed[1].startswith("Exercise 01.1: not yet: ") and printed[3].startswith("Exercise 09.9: no such")
    text = progress_file.read_text(encoding="utf-8")
    assert secret not in text and "message" not in text
    entries = parse_progress(text)
    assert set(entries) == {"01.1", "01.2"}
    assert entries["01.1"].verdict == "not yet" and entries["01.1"].passed_at is None
    assert entries["01.2"].verdict == "passed" and entries["01.2"].passed_at == entries["01.2"].at
    assert time.strptime(entries["01.2"].at, "%Y-%m-%dT%H:%M:%SZ")  # a UTC time stamp
    assert [p.name for p in progress_file.parent.iterdir() if p.name.endswith(".tmp")] == []  # no temp file left


def test_a_check_cell_never_raises_when_its_verdict_cannot_be_kept(tmp_path: Path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(recorder.ENV, str(blocker / "progress.json"))  # its folder cannot be made
    check("01.2", [("x", "1")])
    assert capsys.readouterr().out == "Exercise 01.2: passed\n"
    assert recorder.record_verdict("01.2", "passed") is False
    monkeypatch.setenv(recorder.ENV, "off")
    assert recorder.progress_file() is None and recorder.record_verdict("01.2", "passed") is False
    check("01.2", [("x", "1")])
    assert capsys.readouterr().out == "Exercise 01.2: passed\n"


def test_without_the_variable_the_file_is_in_the_home_folder(monkeypatch, tmp_path: Path):
    monkeypatch.delenv(recorder.ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert recorder.progress_file() == tmp_path / ".streamlab" / "progress.json"


def test_a_file_that_is_not_a_progress_file_is_kept_aside_not_lost(progress_file: Path):
    progress_file.parent.mkdir(parents=True)
    progress_file.write_text("my notes, not JSON")
    assert recorder.read_progress() == {}
    assert recorder.record_verdict("03.2", "not yet") is True
    assert (progress_file.parent / "progress.json.corrupt").read_text() == "my notes, not JSON"
    assert set(recorder.read_progress()) == {"03.2"}


def test_bad_verdicts_are_not_recorded(progress_file: Path):
    assert recorder.record_verdict("3.2", "passed") is False
    assert recorder.record_verdict("03.2", "great") is False
    assert not progress_file.exists()


_WRITER = """
import sys
from streamlab.net.progress import record_verdict
lab = sys.argv[1]
for k in range(1, 26):
    assert record_verdict(f"{lab}.{k}", "passed")
"""


def test_two_kernels_recording_at_once_lose_no_verdict(progress_file: Path):
    """Two processes (two labs open, both running their check cells) write the same file at once: every verdict
    of both is there in the end, and the file is whole at every moment a reader looks."""
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, lab]) for lab in ("05", "06")]
    torn = 0
    while any(p.poll() is None for p in procs):
        try:
            parse_progress(progress_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            pass
        except ValueError:
            torn += 1
    assert [p.wait(60) for p in procs] == [0, 0]
    assert torn == 0
    assert set(recorder.read_progress()) == {f"{lab}.{k}" for lab in ("05", "06") for k in range(1, 26)}


# -- the command line --------------------------------------------------------------------------------------------


def test_streamlab_progress_shows_json_and_resets(progress_file: Path, capsys):
    assert cli(["progress"]) == 0
    out = capsys.readouterr().out
    assert "0 passed" in out and f"(kept in {progress_file}; reset with --reset)" in out
    recorder.record_verdict("03.2", "passed")
    recorder.record_verdict("03.1", "not yet")
    assert cli(["progress", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Lab 03: ") and out[0].endswith("(1 of 3 passed)") and len(out) == 6
    assert cli(["progress", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["file"] == str(progress_file) and doc["counts"]["passed"] == 1 and doc["counts"]["not yet"] == 1
    assert {r["id"]: r["verdict"] for r in doc["exercises"]}["03.2"] == "passed"
    assert len(doc["exercises"]) == sum(len(lab.exercises) for lab in load_catalogue())
    assert cli(["progress", "--reset"]) == 0
    assert capsys.readouterr().out == f"progress reset: removed {progress_file}\n" and not progress_file.exists()
    assert cli(["progress", "--reset"]) == 0
    assert "nothing to reset" in capsys.readouterr().out
    assert cli(["progress", "42"]) == 2
    assert "no lab '42'" in capsys.readouterr().err


def test_streamlab_progress_has_help(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli(["progress", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "--json" in out and "--reset" in out and "never answers" in out


# -- the stand-in's route, without a socket ----------------------------------------------------------------------


def _post(body: object, *, key: str | None = "ada", content_type: str = "application/json") -> object:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    lines = [f"POST {PROGRESS_PATH} HTTP/1.1", "Host: x", f"Content-Type: {content_type}"]
    if key is not None:
        lines.append(f"Authorization: Bearer {key}")
    head = parse_head(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    return plan(Room({}), Request(head, raw))


def test_the_stand_in_takes_a_verdict_and_refuses_anything_else():
    decision = _post({"exercise": "03.2", "verdict": "passed"})
    assert decision.action.status == 200 and decision.action.body == {
        "object": "stand-in.progress",
        "exercise": "03.2",
        "verdict": "passed",
    }
    assert decision.note.learner == "ada" and decision.note.json == {"exercise": "03.2", "verdict": "passed"}
    refused = {
        "no name": (_post({"exercise": "03.2", "verdict": "passed"}, key=None), 401),
        "not a verdict": (_post({"exercise": "03.2", "verdict": "done"}), 400),
        "not an id": (_post({"exercise": "x" * 500, "verdict": "passed"}), 400),
        "not JSON": (_post(b"{", content_type="application/json"), 400),
        "too large": (_post({"exercise": "03.2", "verdict": "passed", "pad": "x" * MAX_VERDICT_BYTES}), 413),
    }
    for what, (decision, status) in refused.items():
        assert decision.action.status == status, what
        assert decision.note.json is None, what  # nothing for the dashboard to show
    head = parse_head(f"GET {PROGRESS_PATH} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert plan(Room({}), Request(head, b"")).action.status == 405


# -- the room link, on real sockets --------------------------------------------------------------------------


@pytest.mark.net
@pytest.mark.usefixtures("no_leaked_threads")
def test_a_joined_room_gets_every_later_verdict(progress_file: Path, capsys):
    from streamlab.net.standin.server import StandIn

    with StandIn({}) as server:
        link = recorder.join_room(server.base_url, name="grace")  # .../v1 is understood too
        try:
            assert recorder.current_room() is link and link.url == server.base_url + "/progress"
            check("01.2", [("x", "1")])
            check("01.1", ...)
            assert link.flush(10) and (link.sent, link.failed) == (2, 0), link
            assert server.wait_idle()
            records = server.records(learner="grace")
            assert [(r.path, r.status, r.json) for r in records] == [
                (PROGRESS_PATH, 200, {"exercise": "01.2", "verdict": "passed"}),
                (PROGRESS_PATH, 200, {"exercise": "01.1", "verdict": "not attempted"}),
            ]
            again = recorder.join_room(server.base_url.removesuffix("/v1") + "/", name="grace")  # the cell re-run
            assert again is not link and recorder.current_room() is again and not link._thread.is_alive()
        finally:
            recorder.leave_room()
        assert recorder.current_room() is None
        check("01.3", ...)  # after leaving, nothing more is sent
        assert server.wait_idle() and len(server.records(learner="grace")) == 2
    assert parse_progress(progress_file.read_text())["01.3"].verdict == "not attempted"  # still kept locally


@pytest.mark.net
@pytest.mark.usefixtures("no_leaked_threads")
def test_a_room_that_cannot_be_reached_never_holds_a_check_cell_up(progress_file: Path, capsys):
    port = free_port()  # nothing listens there
    link = recorder.join_room(f"http://127.0.0.1:{port}", name="linus", timeout=0.5)
    try:
        started = time.monotonic()
        check("01.2", [("x", "1")])
        took = time.monotonic() - started
        assert capsys.readouterr().out == "Exercise 01.2: passed\n"
        assert took < 0.4, f"the check cell waited {took:.2f} s for the room"
        assert link.flush(10) and link.failed == 1 and link.sent == 0
        assert "ConnectError" in (link.last_error or ""), link
        assert "1 failed" in repr(link)
    finally:
        recorder.leave_room()
    assert parse_progress(progress_file.read_text())["01.2"].verdict == "passed"


@pytest.mark.net
@pytest.mark.usefixtures("no_leaked_threads")
def test_a_room_that_never_answers_costs_a_check_cell_nothing(progress_file: Path, capsys):
    with socket.socket() as silent:  # accepts connections (the backlog) and never reads or answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        link = recorder.join_room(f"http://127.0.0.1:{silent.getsockname()[1]}", name="ken", timeout=0.3)
        try:
            started = time.monotonic()
            for k in range(1, 5):
                check(f"01.{k}", ...)
            took = time.monotonic() - started
            assert took < 0.4, f"four check cells waited {took:.2f} s for a silent room"
            assert link.flush(20) and link.failed == 4 and "Timeout" in (link.last_error or ""), link
        finally:
            recorder.leave_room()
    assert len(recorder.read_progress()) == 4


def test_join_room_refuses_what_is_not_a_room_or_a_name():
    for url in ("192.168.1.23:8000", "", "http://"):
        with pytest.raises(ValueError, match="http://"):
            recorder.RoomLink(url, "ada")
    for name in ("", "   ", "a\nb", "x" * 201):
        with pytest.raises(ValueError, match="name"):
            recorder.RoomLink("http://127.0.0.1:9", name)
    assert recorder.current_room() is None


LABS = [  # the Python labs: lab 12 (TypeScript) keeps its verdicts through a child Python and joins no room yet
    p
    for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
    if json.loads(p.read_text(encoding="utf-8"))["metadata"]["kernelspec"]["name"] == "python3"
]


@pytest.mark.net
@pytest.mark.usefixtures("no_leaked_threads")
@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.name[:2])
def test_each_labs_setup_cell_has_the_room_line_commented_out_and_it_works(lab: Path, progress_file: Path, capsys):
    from streamlab.net.standin.server import StandIn

    setup = next(c for c in json.loads(lab.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code")
    lines = [line for line in "".join(setup["source"]).splitlines() if "join_room" in line]
    assert len(lines) == 1 and lines[0].startswith("# import streamlab; streamlab.join_room("), lines
    code = lines[0].removeprefix("# ")
    assert 'name="ada"' in code and '"http://HOST:8000"' in code and 'code="CODE"' in code
    with StandIn({}, join_code="xk7-m2q") as server:  # a room as `streamlab standin` serves one: with a join code
        try:
            learner = code.replace("http://HOST:8000", f"http://127.0.0.1:{server.port}").replace("CODE", "xk7-m2q")
            exec(learner, {})  # what a learner runs, with the banner's address and code
            check(f"{lab.name[:2]}.1", ...)
            assert recorder.current_room().flush(10)
            assert server.wait_idle()
            posted = [r for r in server.records() if r.path.endswith("/progress")]
            assert [(r.status, r.json) for r in posted] == [
                (200, {"exercise": f"{lab.name[:2]}.1", "verdict": "not attempted"})
            ]
        finally:
            recorder.leave_room()
