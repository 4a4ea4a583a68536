"""Issue 33's eight corrections, one test each, read from the labs' text and printed outputs (and the README and
the interview questions), so that a later edit cannot bring a wrong claim back. Where a lab states what the pinned
`openai` SDK does, a second test runs the SDK itself, so that an SDK upgrade that changes the fact fails here too.

The readers are plain: a lab is its cells' sources and its code cells' printed text, as saved by
`tools/notebooks.py execute`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import openai
import pytest
from openai.lib.streaming._deltas import accumulate_delta
from pydantic import BaseModel

from streamlab.core import shapes
from streamlab.core.standin.script import Episode, Send
from streamlab.exercises.lab08 import LAB_PROFILES
from streamlab.net.standin.server import StandIn

ROOT = Path(__file__).resolve().parents[2]
_TENS = {20: "twenty", 30: "thirty", 40: "forty", 50: "fifty"}
_UNITS = ["", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
NUMBER_WORDS = {f"{word}-{_UNITS[u]}" if u else word: tens + u for tens, word in _TENS.items() for u in range(10)}
SMALL_NUMBERS = {"three": 3, "four": 4, "five": 5, "six": 6}


def _cells(lab: str) -> list[dict]:
    path = next((ROOT / "notebooks").glob(f"{lab}-*.ipynb"))
    cells: list[dict] = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return cells


def _src(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _out(cell: dict) -> str:
    """The text a code cell printed (stream outputs and plain-text results)."""
    parts = []
    for output in cell.get("outputs", []):
        if "text" in output:
            parts.append("".join(output["text"]))
        elif "text/plain" in output.get("data", {}):
            parts.append("".join(output["data"]["text/plain"]))
    return "".join(parts)


def _markdown(lab: str) -> str:
    return "\n\n".join(_src(c) for c in _cells(lab) if c["cell_type"] == "markdown")


def _flat(text: str) -> str:
    """Text with its line breaks folded, so a phrase wrapped across lines is still found."""
    return re.sub(r"\s+", " ", text)


def _printed(lab: str, marker: str) -> str:
    """The output of the one code cell whose source contains `marker`."""
    found = [_out(c) for c in _cells(lab) if c["cell_type"] == "code" and marker in _src(c)]
    assert len(found) == 1, f"lab {lab}: {len(found)} code cells contain {marker!r}"
    return found[0]


def _interview() -> str:
    return (ROOT / "notebooks" / "interview-questions.md").read_text(encoding="utf-8")


def _question(number: int) -> str:
    text = _interview()
    start = text.index(f"### {number}. ")
    end = text.find("\n### ", start + 1)
    return text[start : end if end != -1 else len(text)]


# -- 06: the .stream() helpers raise on `length` -----------------------------------------------------------------


def test_lab06_shows_the_stream_helpers_raising_on_length_and_content_filter() -> None:
    printed = _printed("06", "def helper_ending(")
    assert "create(stream=True) on the length stream: ended quietly" in printed
    assert "no response_format     raised LengthFinishReasonError from get_final_completion()" in printed
    assert "response_format=Answer raised LengthFinishReasonError from the loop" in printed
    assert "raised ContentFilterFinishReasonError from get_final_completion()" in printed
    assert "LengthFinishReasonError is an openai.APIError: False" in printed
    assert "ValidationError" in printed and "response.incomplete reached the loop: False" in printed


def test_lab06_no_longer_says_the_sdk_raises_only_for_three_endings() -> None:
    text = _flat(_markdown("06"))
    assert "the SDK raises only for an error object" not in text
    assert "raises only for an error object" in text  # the plain loop's row, now said of `create(stream=True)`
    key_points = _flat(_markdown("06").split("## Key points", 1)[1].split("## Further reading", 1)[0])
    assert "a `create(stream=True)` loop raises only for" in key_points
    assert "`LengthFinishReasonError`" in key_points and "`ContentFilterFinishReasonError`" in key_points
    assert "before `response.incomplete`" in key_points


class _Answer(BaseModel):
    answer: str


def test_the_pinned_sdk_raises_on_length_from_the_helper_only() -> None:
    cut = [Send(f) for f in shapes.chat_text_stream(['{"answer": ', '"forty-'], finish_reason="length")]
    ask = {"model": "length", "messages": [{"role": "user", "content": "JSON?"}]}
    with StandIn({"length": [Episode(cut)] * 3}) as standin:
        client = openai.OpenAI(base_url=standin.base_url, api_key="stand-in", max_retries=0)
        with client:
            chunks = list(client.chat.completions.create(stream=True, **ask))  # the plain loop: quiet
            assert chunks[-1].choices[0].finish_reason == "length"
            with client.chat.completions.stream(**ask) as helper:
                helper.until_done()  # no response_format: the loop is quiet too ...
                with pytest.raises(openai.LengthFinishReasonError):
                    helper.get_final_completion()  # ... the final object is not
            with pytest.raises(openai.LengthFinishReasonError):
                with client.chat.completions.stream(response_format=_Answer, **ask) as helper:
                    for _ in helper:  # with a response_format the loop raises at the finish chunk
                        pass
    assert not issubclass(openai.LengthFinishReasonError, openai.APIError)


# -- 03: the SDK replaces `index` and `type` ----------------------------------------------------------------------


def test_lab03_says_and_shows_the_sdk_replacing_index_and_type() -> None:
    text = _flat(_markdown("03"))
    assert "concatenates them like the arguments" not in text
    assert "*replaces* `index` and `type`" in text
    printed = _printed("03", "accumulate_delta(merged, delta)")
    assert "index 1  type 'function'" in printed
    assert "id 'call_bcall_b'" in printed and "name 'get_timeget_time'" in printed


def test_the_pinned_sdk_replaces_index_and_type_and_joins_id_and_name() -> None:
    def fragment(index: int, arguments: str) -> dict:
        call = {
            "index": index,
            "id": f"call_{index}",
            "type": "function",
            "function": {"name": "f", "arguments": arguments},
        }
        return {"tool_calls": [call]}

    merged: dict = {}
    for delta in [fragment(0, "{"), fragment(1, "["), fragment(0, "}"), fragment(1, "]")]:
        merged = accumulate_delta(merged, delta)
    second = merged["tool_calls"][1]
    assert (second["index"], second["type"]) == (1, "function")
    assert (second["id"], second["function"]["name"], second["function"]["arguments"]) == ("call_1call_1", "ff", "[]")


# -- 05: what a browser's EventSource can send --------------------------------------------------------------------


def _last_event_id_section() -> str:
    text = _markdown("05")
    start = text.index("### The standard mechanism: `Last-Event-ID`")
    return text[start : text.index("\n## ", start)]


def test_lab05_says_what_an_eventsource_can_and_cannot_send() -> None:
    section = _last_event_id_section()
    flat = _flat(section)
    assert "a browser's `EventSource` does this automatically" not in flat
    for fact in ("can only send a `GET`", "no body", "no headers of your own", "after a clean end", "204 No Content"):
        assert fact in flat, fact
    assert "12-typescript-and-the-browser.ipynb" in section
    diagram = section.split("```mermaid", 1)[1].split("```", 1)[0]
    browser = [line.strip() for line in diagram.splitlines() if line.strip().startswith("B->>")]
    assert browser and all("GET" in line and "POST" not in line for line in browser), browser
    assert any("204" in line for line in diagram.splitlines() if line.strip().startswith("S-->>B"))


def test_lab05_prints_lab12s_recorded_eventsource_facts() -> None:
    printed = _printed("05", "load_recorded()")
    assert "Authorization: absent | Content-Type (a body): False" in printed
    assert "a server that ends cleanly: statuses [200, 200], the answer generated 2 times" in printed
    assert "answers the reconnect with 204: statuses [200, 204], generated 1 time(s)" in printed


def test_interview_q14_says_what_an_eventsource_sends() -> None:
    answer = _flat(_question(14))
    for fact in ("sends only a GET", "no custom headers", "reconnects even after a clean end", "204"):
        assert fact in answer, fact


# -- 07, 09, Q16: no-cache and X-Accel-Buffering (corrected in an earlier round; kept so) ---------------------------


def test_no_lab_says_no_cache_or_x_accel_buffering_stops_a_cdn_buffering() -> None:
    assert "nginx alone" in _flat(_markdown("07")) and "no CDN reads it" in _flat(_markdown("07"))
    lab09 = _flat(_markdown("09"))
    assert "`Cache-Control: no-cache` fixes none of this" in lab09 and "a CDN: each has its own rules" in lab09
    q16 = _flat(_question(16))
    assert "a header only nginx reads" in q16 and "it stops nothing from buffering" in q16


# -- 08: LiteLLM's quirks were not all fixed ---------------------------------------------------------------------


def test_lab08_does_not_say_every_server_fixed_its_quirks() -> None:
    text = _flat(_markdown("08"))
    assert "Every one of these servers fixed" not in text
    for ref in ("#28735 (closed as stale, not fixed)", "#28736 (open)", "#21041", "#22900"):
        assert ref in text, ref


# -- 08 and the README: the number of checks ---------------------------------------------------------------------


def _lab08_counts() -> tuple[int, int]:
    """(all checks, Chat-only checks), as lab 08's own outputs print them."""
    printed = _printed("08", 'groups = [check["group"] for check in doc["checks"]]')
    summary = json.loads(re.search(r"'summary': (\{[^}]*\})", printed).group(1).replace("'", '"'))  # type: ignore[union-attr]
    total = sum(summary.values())
    groups = re.search(r"(\d+) checks by group:.*--dialect chat\): (\d+)", printed)
    assert groups is not None and int(groups.group(1)) == total
    return total, int(groups.group(2))


def test_lab08_text_counts_the_checks_its_outputs_print() -> None:
    total, chat = _lab08_counts()
    text = _flat(_markdown("08"))
    assert f"grades {total} promises" in text and f"({chat} of them with `--dialect chat`" in text
    for words, number in NUMBER_WORDS.items():
        if number != total:
            assert words.capitalize() + " passes" not in text and words + " promises" not in text
    word = next(w for w, n in NUMBER_WORDS.items() if n == total)
    assert f"{word.capitalize()} passes" in text
    assert f"{total} checks<br/>" in text  # the diagram
    matrix = next(_src(c) for c in _cells("08") if "plot_compatibility_matrix(reports" in _src(c))
    assert f"{word} promises" in matrix
    rows = _printed("08", "reports[name] = check_endpoint(")
    for line in rows.splitlines():
        numbers = [int(n) for n in re.findall(r"(\d+) (?:pass|warn|fail|skip)", line)]
        assert sum(numbers) == total, line


def test_the_readme_counts_the_checks_lab08_prints() -> None:
    total, chat = _lab08_counts()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    flat = _flat(readme)
    assert f"grades {total} promises" in flat and f"({chat} with the default `--dialect chat`)" in flat
    assert f"one of its {chat} checks shown" in flat
    example = readme.split("one of its", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    summary = json.loads(re.search(r'"summary": (\{[^}]*\})', example).group(1))  # type: ignore[union-attr]
    assert '"dialect": "chat"' in example and sum(summary.values()) == chat


# -- 08: four real servers, not five -----------------------------------------------------------------------------


def test_lab08_counts_four_real_servers() -> None:
    real = [name for name in LAB_PROFILES if name not in ("openai", "broken")]
    text = _flat(_markdown("08"))
    said = next(word for word, n in SMALL_NUMBERS.items() if n == len(real))
    assert "five real servers" not in text and "of the five servers" not in text
    assert f"{said} real servers" in text
    assert "the API reference written out" in text and "deliberately broken server" in text


# -- 03 and 08: sequence_number strictly increasing is an inference ---------------------------------------------


@pytest.mark.parametrize("lab", ["03", "08"])
def test_sequence_number_strictly_increasing_is_labelled_an_inference(lab: str) -> None:
    claims = [_flat(_src(c)) for c in _cells(lab) if c["cell_type"] == "markdown" and "strictly increas" in _src(c)]
    assert claims, f"lab {lab} no longer discusses the order of sequence numbers"
    for cell in claims:
        assert "inference" in cell and '"the sequence number of this event"' in cell, cell[:200]
    key_points = _flat(_markdown(lab).split("## Key points", 1)[1]) if lab == "03" else ""
    if key_points:
        assert "an inference" in key_points
