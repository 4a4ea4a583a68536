"""INSTRUCTORS.md says what the code does: every exercise in its poll table, each verdict as the checker prints it,
each lab's time as its notebook's header gives it, and only models, commands and files that exist.

The check-cell table is made by tools/instructors_table.py; when a test here fails because of it, run
`.venv/bin/python tools/instructors_table.py --write` and review the diff. The typical wrong answers of labs 06
and 07 start servers (the SDK against a stand-in, a relay through the chaos proxy), so their tests are `slow`; a
verdict that quotes a timing is compared with its digits masked.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import standin_base, streamlab_cli

from streamlab.core.standin.scenarios import scenario
from tools.instructors_table import (
    SERVER_LABS,
    WRONG,
    Row,
    markdown,
    notebook,
    registered,
    rows,
    section,
    wrong_verdict,
)

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "INSTRUCTORS.md").read_text(encoding="utf-8")
REGENERATE = "out of date: run `.venv/bin/python tools/instructors_table.py --write` and review the diff"


def _split(line: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]


DOC_ROWS = {_split(line)[0].strip("`"): _split(line) for line in section(DOC).splitlines()[2:]}


def test_the_poll_table_lists_every_registered_exercise_once() -> None:
    table_ids = [_split(line)[0].strip("`") for line in section(DOC).splitlines()[2:]]
    assert table_ids == list(registered()), REGENERATE
    assert set(WRONG) >= set(registered()), "every exercise needs a typical wrong answer in tools/instructors_table.py"


def test_the_poll_table_says_what_the_notebooks_and_checkers_print() -> None:
    """Every column but the wrong answers' verdicts, from the registry and the committed check-cell outputs."""
    made = {_split(line)[0].strip("`"): _split(line) for line in markdown(rows(wrong=False)).splitlines()[2:]}
    for ex_id, cells in made.items():
        if notebook(ex_id[:2]) is None:
            continue  # a lab whose checks exist and whose notebook is still being written
        assert DOC_ROWS[ex_id][:5] == cells[:5], f"{ex_id}: {REGENERATE}"
        assert cells[2] == "not attempted yet", f"{ex_id}: the committed check cell should show an untouched stub"


def _masked(text: str) -> str:
    return re.sub(r"\d+(\.\d+)?", "N", text)


def _wrong_cases() -> list[pytest.param]:
    cases = []
    for ex_id in registered():
        marks = [pytest.mark.net, pytest.mark.slow] if ex_id[:2] in SERVER_LABS else []
        cases.append(pytest.param(ex_id, marks=marks, id=ex_id))
    return cases


@pytest.mark.parametrize("ex_id", _wrong_cases())
def test_each_typical_wrong_answer_prints_the_not_yet_the_table_shows(ex_id: str) -> None:
    if notebook(ex_id[:2]) is None:
        pytest.skip(f"lab {ex_id[:2]} has no notebook yet")
    printed = wrong_verdict(ex_id)
    assert printed.startswith("not yet: "), f"{ex_id}: the typical wrong answer is not told apart: {printed}"
    made = _split(markdown([Row(ex_id, "", "", "", "", printed)]).splitlines()[2])[5]
    have = DOC_ROWS[ex_id][5]
    if ex_id[:2] in SERVER_LABS:  # a relay or SDK check may quote a time ("0.01 s after ...")
        made, have = _masked(made), _masked(have)
    assert have == made, f"{ex_id}: {REGENERATE}"


# -- the agendas ------------------------------------------------------------------------------------------------

AGENDA_ROW = re.compile(r"^\| (\d\d):(\d\d) \| (\d+) min \| (.*?) \|", re.M)
BUDGET = re.compile(r"\*\*Time budget:\*\* about (\d+) minutes")
LAB_LINK = re.compile(r"\[Lab (\d\d): [^]]+\]\((notebooks/(\d\d)-[^)]+\.ipynb)\)")


def _agenda(title: str) -> list[tuple[int, int, str]]:
    body = DOC.split(f"### {title}\n", 1)[1].split("\n### ", 1)[0].split("\n**", 1)[0]
    return [(int(h) * 60 + int(m), int(minutes), what) for h, m, minutes, what in AGENDA_ROW.findall(body)]


@pytest.mark.parametrize("title", ["Half day", "Full day"])
def test_each_agenda_runs_without_gaps_and_gives_each_lab_its_budget(title: str) -> None:
    agenda = _agenda(title)
    assert len(agenda) >= 6
    for (start, minutes, what), (after, _, _) in zip(agenda, agenda[1:]):
        assert after == start + minutes, f"{title}: {what} starts at {start // 60}:{start % 60:02} for {minutes} min"
    for _, minutes, what in agenda:
        link = LAB_LINK.search(what)
        if link is None:
            continue
        lab, path = link.group(1), ROOT / link.group(2)
        assert link.group(3) == lab and path.name.startswith(lab)
        if not path.exists():
            pytest.skip(f"{path.name} is not written yet")
        budget = int(BUDGET.search(path.read_text(encoding="utf-8")).group(1))
        if "(part)" in what:
            assert minutes < budget, f"{title}: a part of lab {lab} takes less than its {budget} min"
        else:
            assert minutes == budget, f"{title}: lab {lab} gets {minutes} min, its header says {budget}"


def test_every_lab_is_in_an_agenda_or_named_for_later() -> None:
    in_agendas = {
        LAB_LINK.search(what).group(1)
        for title in ("Half day", "Full day")
        for _, _, what in _agenda(title)
        if LAB_LINK.search(what)
    }
    later = set(re.findall(r"labs? ((?:\d\d(?:, | and )?)+) for later", DOC)[0].replace(" and ", ", ").split(", "))
    labs = {path.name[:2] for path in (ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb")}
    assert labs <= in_agendas | later, f"not planned anywhere: {sorted(labs - in_agendas - later)}"


# -- names that must exist --------------------------------------------------------------------------------------


def _code() -> str:
    """Every code block and inline code span of the guide."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", DOC, re.S)
    return "\n".join(blocks + re.findall(r"`([^`\n]+)`", DOC))


def test_every_model_the_guide_asks_for_is_served_by_the_room_stand_in() -> None:
    served = set(scenario("all"))
    code = _code()
    asked = set(re.findall(r"\bask(?:r)? ([a-z][\w-]*)", code))
    asked |= set(re.findall(r"""model=["']([\w-]+)["']""", code))
    asked |= set(re.findall(r'\\?"model\\?": \\?"([\w-]+)', code))
    assert asked, "the guide's demos ask for no model: has the syntax changed?"
    assert asked <= served, f"not served by `streamlab standin --scenario all`: {sorted(asked - served)}"


def test_every_streamlab_subcommand_the_guide_uses_exists() -> None:
    help_text = subprocess.run(
        [sys.executable, "-m", "streamlab", "--help"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    commands = set(re.search(r"\{([\w,-]+)\}", help_text).group(1).split(","))
    used = set(re.findall(r"\bstreamlab ([a-z][\w-]*)", _code())) - {"stand"}
    assert used and used <= commands, f"no such subcommand: {sorted(used - commands)}"


def test_every_relative_link_and_named_file_exists() -> None:
    links = [target for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", DOC) if "://" not in target]
    files = re.findall(r"`((?:tools|tests|notebooks|benchmarks|streamlab)/[\w./-]+\.(?:py|md|ipynb))`", DOC)
    planned = {f"notebooks/{ex_id[:2]}-" for ex_id in registered()}  # labs whose checks exist: notebook on its way
    missing = [
        name
        for name in links + files
        if not (ROOT / name).exists() and "NN" not in name and not any(name.startswith(p) for p in planned)
    ]
    assert not missing, f"INSTRUCTORS.md names files that do not exist: {missing}"


def test_the_reset_and_the_room_sections_name_the_real_commands() -> None:
    assert "python3 dev.py reset 05" in DOC and "--yes" in DOC
    assert 'client.post("/reset", cast_to=object)' in DOC
    assert "streamlab standin --scenario all --host 0.0.0.0 --port 8000" in DOC
    assert "/dashboard" in DOC and "urlpath=lab/tree/notebooks/README.md" in DOC


def test_the_scenario_table_matches_the_room_stand_ins_list() -> None:
    try:
        from streamlab.core.standin.scenarios import ROOM_SCENARIOS
    except ImportError:
        pytest.skip("this streamlab has no ROOM_SCENARIOS table")
    body = DOC.split("| model | scenario | what it plays | labs |", 1)[1].split("\n\n", 1)[0]
    table = {cells[0].strip("`"): (cells[1], tuple(cells[3].split())) for cells in map(_split, body.splitlines()[2:])}
    assert table == {s.model: (s.name, s.labs) for s in ROOM_SCENARIOS}


# -- the demos: what the guide says a command prints is what it prints ---------------------------------------------

DEMO_08 = DOC.split("**Lab 08, verify an endpoint.**", 1)[1].split("\n\n", 1)[0]
CHECK_LINE = re.compile(r"^\s+(PASS|WARN|FAIL|SKIP)\s+(\S+)", re.M)


@pytest.mark.net
def test_the_lab_08_demo_prints_what_the_guide_says() -> None:
    """The room stand-in started as an instructor does (`streamlab standin`), then the guide's own `streamlab check`
    command run against it: its summary line is the one the guide quotes, every check that fails or skips is named
    in the guide's paragraph, and no check that passes is named there as if it had not."""
    command = re.search(r"`(streamlab check \$ROOM [^`]*)`", DEMO_08)
    summary = re.search(r"`(\d+ pass, \d+ warn, \d+ fail, \d+ skip: \w+ \(exit \d+\))`", DEMO_08)
    assert command and summary, "the lab 08 demo names its command and quotes the summary line it ends with"
    with streamlab_cli("standin", "--port", "0", "--quiet") as standin:
        room = standin_base(standin)
        args = [room if arg == "$ROOM" else arg for arg in command.group(1).split()[1:]]
        done = subprocess.run(
            [sys.executable, "-m", "streamlab", *args], capture_output=True, text=True, timeout=240, check=False
        )
    out = done.stdout
    assert out.rstrip().splitlines()[-1] == summary.group(1), out[-1500:]
    assert f"(exit {done.returncode})" in summary.group(1)
    verdicts = dict((name, word) for word, name in CHECK_LINE.findall(out))
    named = set(re.findall(r"`([a-z_]+\.[a-z_]+)`", DEMO_08))
    not_passing = {name for name, word in verdicts.items() if word != "PASS"}
    assert not_passing <= named, f"the guide does not say that these fail or skip: {sorted(not_passing - named)}"
    assert not named & {name for name, word in verdicts.items() if word == "PASS"}, "the guide names passing checks"
