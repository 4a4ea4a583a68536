"""A learner's progress as data: check-cell verdicts, the exercise catalogue, the progress table (sans-IO core).

Every check cell (`streamlab.exercises.check`) ends in one of three verdicts, `VERDICTS`: passed, not yet,
not attempted. What a learner keeps of them on their own machine is only that, per exercise id: the last
verdict, when it was given, and when the exercise was last passed (`Entry`). Never an answer, never code:
the file is safe to show anyone. `streamlab.net.progress` reads and writes it (atomically) and forwards each
verdict to a room's stand-in when the learner has joined one; this module decides everything else, with no
file, clock or socket: the file's format (`parse_progress`, `dump_progress`), what recording one more verdict
does (`recorded`), the body a room receives (`read_verdict`, the one check both sides use) and the table that
`streamlab progress` and the labs' index print (`progress_table`, `progress_document`).

The catalogue (`load_catalogue`) is `data/exercises.json`: every lab and the exercises of its check cells, so
the table can list the exercises never checked without importing the labs' checkers (which would pull the
whole library into the command line). `tools/exercise_catalogue.py --write` makes it from the registry in
`streamlab.exercises`; tests/labs/test_progress.py fails when the two disagree.

A progress file outlives the version that wrote it. Recording a verdict (`recorded_text`) changes that one
exercise's entry and keeps everything else as it was: keys and entries this version does not understand, a
newer streamlab's included. A file of a newer format (`file_format` above `FORMAT`) is left as it is, never
rewritten nor moved aside by this version (it had been moved aside as corrupt). A file over
`MAX_PROGRESS_BYTES` is not one streamlab wrote (a real one is a few KB; a 127 MB one was read on every check).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streamlab.core.harness.fixtures import data_dir

__all__ = [
    "VERDICTS",
    "EXERCISE_ID",
    "PROGRESS_PATH",
    "MAX_VERDICT_BYTES",
    "FORMAT",
    "MAX_PROGRESS_BYTES",
    "Entry",
    "ExerciseVerdict",
    "CatalogueLab",
    "read_verdict",
    "recorded",
    "parse_progress",
    "dump_progress",
    "file_format",
    "recorded_text",
    "load_catalogue",
    "progress_document",
    "progress_table",
]

VERDICTS = ("passed", "not yet", "not attempted")
"""The verdicts a check cell gives, as they are recorded and sent (the words of its verdict line)."""

EXERCISE_ID = re.compile(r"[0-9]{2}\.[0-9]{1,2}")
"""An exercise id: lab NN, a dot, exercise K ("03.2"). Matched whole (`fullmatch`)."""

PROGRESS_PATH = "/v1/progress"
"""Where a room's stand-in receives verdicts: `POST` with `{"exercise": "03.2", "verdict": "passed"}`."""

MAX_VERDICT_BYTES = 1024
"""The largest verdict body a stand-in reads (a real one is about 50 bytes)."""

FORMAT = 1
"""The version of the progress file's format (`dump_progress`)."""

MAX_PROGRESS_BYTES = 1024 * 1024
"""The largest progress file read: streamlab's own are a few KB (a verdict per exercise)."""


@dataclass(frozen=True)
class Entry:
    """One exercise's record: its last `verdict`, when it was given (`at`, ISO 8601 UTC such as
    "2026-11-29T10:31:07Z"), and when it was last passed (`passed_at`, None if never)."""

    verdict: str
    at: str
    passed_at: str | None = None


@dataclass(frozen=True)
class ExerciseVerdict:
    """One verdict as a room's stand-in receives it: which exercise, which of `VERDICTS`."""

    exercise: str
    verdict: str

    def as_json(self) -> dict[str, str]:
        return {"exercise": self.exercise, "verdict": self.verdict}


@dataclass(frozen=True)
class CatalogueLab:
    """One lab of the catalogue: its number, title, notebook (None while the lab has none yet), and its
    exercises as (id, the name filled in)."""

    lab: str
    title: str
    notebook: str | None
    exercises: tuple[tuple[str, str], ...]


def read_verdict(body: Any) -> ExerciseVerdict | str:
    """The verdict in a room's POST body, or what is wrong with it (a sentence for the 400). Other fields are
    ignored, so a newer client can send more."""
    if not isinstance(body, dict):
        return f"a verdict is a JSON object, not {type(body).__name__}"
    exercise, verdict = body.get("exercise"), body.get("verdict")
    if not isinstance(exercise, str) or not EXERCISE_ID.fullmatch(exercise):
        return 'exercise must be an exercise id such as "03.2" (lab NN, a dot, exercise K)'
    if verdict not in VERDICTS:
        return f"verdict must be one of {', '.join(repr(v) for v in VERDICTS)}"
    return ExerciseVerdict(exercise, verdict)


def recorded(progress: Mapping[str, Entry], exercise: str, verdict: str, at: str) -> dict[str, Entry]:
    """`progress` with one more verdict: the exercise's last verdict and time replaced, its last pass kept
    (or moved to `at` when this one passed). ValueError for an id or verdict that is not one."""
    if not EXERCISE_ID.fullmatch(exercise) or verdict not in VERDICTS:
        raise ValueError(f"not an exercise verdict: {exercise!r}, {verdict!r}")
    before = progress.get(exercise)
    passed_at = at if verdict == "passed" else (before.passed_at if before is not None else None)
    return {**progress, exercise: Entry(verdict, at, passed_at)}


def _document(text: str) -> dict[str, Any]:
    """The JSON object of a progress file of any format; ValueError when it is not one."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    version = doc.get("format") if isinstance(doc, dict) else None
    if isinstance(version, bool) or not isinstance(version, int) or version < FORMAT:
        raise ValueError(f"not a streamlab progress file (format {FORMAT})")
    if not isinstance(doc.get("exercises"), dict):
        raise ValueError(f"not a streamlab progress file (format {FORMAT}): no exercises")
    return doc


def file_format(text: str) -> int | None:
    """The format a progress file says it has (None: not a progress file). Above `FORMAT`: a newer streamlab
    wrote it, and this one only reads it."""
    try:
        return int(_document(text)["format"])
    except ValueError:
        return None


def parse_progress(text: str) -> dict[str, Entry]:
    """The entries of a progress file. ValueError when the text is not a progress file of this format (not
    JSON, no format, a newer one: `file_format` tells them apart); an entry that does not make sense is
    skipped, so one bad line never costs the rest."""
    doc = _document(text)
    if doc["format"] != FORMAT:
        raise ValueError(f"a progress file of format {doc['format']}, not {FORMAT}")
    return _entries(doc)


def _entries(doc: dict[str, Any]) -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    for exercise, item in doc["exercises"].items():
        if not (EXERCISE_ID.fullmatch(exercise) and isinstance(item, dict) and item.get("verdict") in VERDICTS):
            continue
        at, passed_at = item.get("at"), item.get("passed_at")
        if isinstance(at, str) and (passed_at is None or isinstance(passed_at, str)):
            out[exercise] = Entry(item["verdict"], at[:40], passed_at[:40] if passed_at else None)
    return out


def dump_progress(progress: Mapping[str, Entry]) -> str:
    """The text of a progress file: verdicts and times only, exercises in order."""
    doc = {"format": FORMAT, "exercises": {ex: _entry_json(progress[ex]) for ex in sorted(progress, key=_order)}}
    return json.dumps(doc, indent=1) + "\n"


def recorded_text(text: str | None, exercise: str, verdict: str, at: str) -> str:
    """The text of progress file `text` (None: a new one) with one more verdict: that exercise's entry changed
    (`recorded`), the fields of it this version does not know kept, and every other key and entry kept as it
    was. ValueError when `text` is not a progress file of this version's format (a newer one is never
    rewritten: `file_format`)."""
    doc: dict[str, Any] = _document(text) if text is not None else {"format": FORMAT, "exercises": {}}
    if doc["format"] != FORMAT:
        raise ValueError(f"a progress file of format {doc['format']}, newer than this streamlab's ({FORMAT})")
    entry = recorded(_entries(doc), exercise, verdict, at)[exercise]
    before = doc["exercises"].get(exercise)
    doc["exercises"][exercise] = {**(before if isinstance(before, dict) else {}), **_entry_json(entry)}
    known = sorted((ex for ex in doc["exercises"] if EXERCISE_ID.fullmatch(ex)), key=_order)
    doc["exercises"] = {ex: doc["exercises"][ex] for ex in [*known, *doc["exercises"]]}  # others after, in order
    return json.dumps(doc, indent=1) + "\n"


def _entry_json(entry: Entry) -> dict[str, Any]:
    return {"verdict": entry.verdict, "at": entry.at, "passed_at": entry.passed_at}


def _order(exercise: str) -> tuple[int, int]:
    lab, _, k = exercise.partition(".")
    return int(lab), int(k)


def load_catalogue() -> tuple[CatalogueLab, ...]:
    """Every lab with exercises and its exercises, in order, from `data/exercises.json`."""
    doc = json.loads((data_dir() / "exercises.json").read_text(encoding="utf-8"))
    return tuple(
        CatalogueLab(lab["lab"], lab["title"], lab["notebook"], tuple(lab["exercises"].items())) for lab in doc["labs"]
    )


def progress_document(progress: Mapping[str, Entry], catalogue: Sequence[CatalogueLab]) -> dict[str, Any]:
    """Every exercise of the catalogue with its record (verdict None: never checked), then any recorded
    exercise the catalogue does not know, and the counts: what `streamlab progress --json` prints."""
    rows: list[dict[str, Any]] = []
    known: set[str] = set()
    for lab in catalogue:
        for exercise, name in lab.exercises:
            known.add(exercise)
            rows.append(_row(exercise, lab.lab, name, progress.get(exercise)))
    for exercise in sorted((ex for ex in progress if ex not in known), key=_order):
        rows.append(_row(exercise, exercise[:2], None, progress[exercise]))
    counts = {verdict: sum(r["verdict"] == verdict for r in rows) for verdict in VERDICTS}
    counts["never checked"] = sum(r["verdict"] is None for r in rows)
    return {"exercises": rows, "counts": {"exercises": len(rows), **counts}}


def _row(exercise: str, lab: str, name: str | None, entry: Entry | None) -> dict[str, Any]:
    return {
        "id": exercise,
        "lab": lab,
        "name": name,
        "verdict": None if entry is None else entry.verdict,
        "at": None if entry is None else entry.at,
        "passed_at": None if entry is None else entry.passed_at,
    }


def progress_table(progress: Mapping[str, Entry], catalogue: Sequence[CatalogueLab]) -> str:
    """The progress table: one heading per lab with how many of its exercises passed, one line per exercise
    (its last verdict and when; "-" for never checked; the last pass when a later check did not pass), and
    the totals. Plain text, the same in a terminal and in a notebook."""
    doc = progress_document(progress, catalogue)
    titles = {lab.lab: lab.title for lab in catalogue}
    width = max([len(r["name"] or "") for r in doc["exercises"]] + [4])
    lines: list[str] = []
    for lab in sorted({r["lab"] for r in doc["exercises"]}):
        rows = [r for r in doc["exercises"] if r["lab"] == lab]
        passed = sum(r["verdict"] == "passed" for r in rows)
        heading = f"Lab {lab}: {titles.get(lab, '(not in the catalogue)')}"
        lines.append(f"{heading}  ({passed} of {len(rows)} passed)")
        for r in rows:
            lines.append(f"  {r['id']:<5}  {r['name'] or '?':<{width}}  {_status(r)}".rstrip())
    c = doc["counts"]
    lines.append(
        f"{c['exercises']} exercises: {c['passed']} passed, {c['not yet']} not yet, "
        f"{c['not attempted']} not attempted, {c['never checked']} never checked"
    )
    return "\n".join(lines)


def _status(row: dict[str, Any]) -> str:
    if row["verdict"] is None:
        return "-"
    text = f"{row['verdict']:<13}  {_when(row['at'])}"
    if row["verdict"] != "passed" and row["passed_at"]:
        text += f"  (passed {_when(row['passed_at'])})"
    return text


def _when(at: str) -> str:
    """A stamp such as "2026-11-29T10:31:07Z" as "2026-11-29 10:31 UTC" (another stamp is shown as it is)."""
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})(?::\d{2}(?:\.\d+)?)?Z", at)
    return f"{m.group(1)} {m.group(2)} UTC" if m else at
