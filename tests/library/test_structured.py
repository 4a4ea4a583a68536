"""Structured output while streaming (issue 33, item 3): partial JSON shown as it arrives, a cut answer reported as
incomplete (never a parse error), and the official SDK's helper on the same bytes (openai-python#3263)."""

from __future__ import annotations

import json

import jiter  # the SDK's own partial parser (a dependency of openai): the reference for parse_partial
import openai
import pydantic
import pytest

from streamlab.core import shapes
from streamlab.core.accumulate import ChatAccumulator
from streamlab.core.endings import Outcome
from streamlab.core.partialjson import MAX_DEPTH, PartialJSONError, parse_partial, structured_answer
from streamlab.core.standin.scenarios import STRUCTURED_ANSWER, scenario
from streamlab.net.client import stream_chat
from streamlab.net.sdk import sdk_structured_stream
from streamlab.net.standin.server import StandIn

DOCUMENTS = [
    STRUCTURED_ANSWER,
    {"name": "Ada", "born": 1815, "tags": ["math", "poetry"], "alive": False, "x": None, "score": -12.5e3},
    {"escapes": 'caf\u00e9 \\ "q" \U0001f600 \n\t', "e": 1e-7, "big": 12345678901234567890},
    [1, [2, [3, {}]], [], {"a": {"b": {"c": [True, False, None]}}}],
]


def texts():
    for doc in DOCUMENTS:
        yield json.dumps(doc)
        yield json.dumps(doc, indent=2)
        yield json.dumps(doc, ensure_ascii=False)


@pytest.mark.parametrize("trailing", [True, False])
def test_every_prefix_parses_as_the_sdks_own_partial_parser_reads_it(trailing: bool) -> None:
    mode = "trailing-strings" if trailing else True
    compared = 0
    for text in texts():
        for end in range(1, len(text) + 1):
            prefix = text[:end]
            if not prefix.strip():
                continue
            assert parse_partial(prefix, trailing_strings=trailing) == jiter.from_json(
                prefix.encode(), partial_mode=mode
            ), prefix
            compared += 1
    assert compared > 1000


@pytest.mark.parametrize("prefix", ['"pla', "-", "-0.", "tr", "", "  "])
def test_a_cut_scalar_holds_nothing_yet_where_jiter_raises(prefix: str) -> None:
    # the one difference from jiter: a prefix of a document never raises (a top-level scalar cut: nothing yet)
    assert parse_partial(prefix, trailing_strings=False) is None


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a": "hel', {"a": "hel"}),
        ('{"a": "x\\u00', {"a": "x"}),  # an escape cut in the middle says nothing yet
        ('{"a": "\\ud83d', {"a": ""}),  # nor half a surrogate pair
        ('{"a": tr', {}),
        ('{"a": 1.', {}),
        ('{"a": [1, 2', {"a": [1, 2]}),
        ('{"ke', {}),
        ('{"key": ', {}),
        ('[{"a": 1}, {"b"', [{"a": 1}, {}]),
    ],
)
def test_what_a_prefix_holds(text: str, value: object) -> None:
    assert parse_partial(text) == value


@pytest.mark.parametrize(
    "text", ["[NaN]", "[1, Infinity", "{'a': 1}", '{"a" 1}', "[1 2]", '{"a": 1}}', "nope", '{"a": "\x01"}', "01"]
)
def test_text_no_document_starts_with_is_an_error(text: str) -> None:
    with pytest.raises(PartialJSONError):
        parse_partial(text)


def test_nesting_is_bounded_before_python_recursion_is() -> None:
    deepest: list = []
    for _ in range(MAX_DEPTH - 1):
        deepest = [deepest]
    assert parse_partial("[" * MAX_DEPTH) == deepest
    with pytest.raises(PartialJSONError, match="nested deeper"):
        parse_partial("[" * (MAX_DEPTH + 1))
    with pytest.raises(PartialJSONError):
        parse_partial("[" * 100_000)


def test_a_cut_answer_is_incomplete_never_a_parse_error() -> None:
    text = json.dumps(STRUCTURED_ANSWER)[:40]
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)  # what a client that parses the text at the end reports
    for outcome in (Outcome.INCOMPLETE, Outcome.TRUNCATED, Outcome.CANCELLED, Outcome.COMPLETE):
        verdict = structured_answer(text, outcome)
        assert verdict.status == "incomplete" and verdict.value == parse_partial(text), outcome
    whole = structured_answer(json.dumps(STRUCTURED_ANSWER), Outcome.COMPLETE)
    assert whole.complete and whole.value == STRUCTURED_ANSWER
    assert structured_answer("Sorry, I cannot", Outcome.COMPLETE).status == "invalid"
    assert structured_answer('{"a": 1} trailing', Outcome.COMPLETE).status == "invalid"


def test_json_pieces_cut_inside_keys_strings_and_numbers() -> None:
    pieces = shapes.json_pieces(STRUCTURED_ANSWER)
    assert "".join(pieces) == shapes.to_json(STRUCTURED_ANSWER) and len(pieces) > 10
    shown = [parse_partial("".join(pieces[:k])) for k in range(1, len(pieces) + 1)]
    assert shown[-1] == STRUCTURED_ANSWER and len({json.dumps(v) for v in shown}) > len(pieces) // 2


# -- the stand-in, the library's client and the SDK on the same bytes ---------------------------------------------


class Weather(pydantic.BaseModel):
    city: str
    temperature_c: float
    conditions: list[str]
    umbrella: bool
    advice: str


@pytest.fixture(scope="module")
def server():
    with StandIn({**scenario("structured"), **scenario("structured-cut")}) as running:
        yield running


ASK = [{"role": "user", "content": "The weather in Paris, as JSON."}]


@pytest.mark.parametrize(("model", "status"), [("structured", "complete"), ("structured-cut", "incomplete")])
def test_the_library_shows_the_answer_growing_and_judges_its_end(server: StandIn, model: str, status: str) -> None:
    acc = ChatAccumulator()
    shown = []
    with stream_chat(server.base_url, {"model": model, "messages": ASK}) as stream:
        for timed in stream:
            acc.feed(timed.event)
            shown.append(parse_partial(acc.text.get(0, "")))
    verdict = structured_answer(acc.text[0], acc.outcome())
    assert verdict.status == status and verdict.value == shown[-1]
    assert {"city": "Paris"} in shown  # a field shows before the document is whole
    if status == "incomplete":
        assert acc.finish_reason == {0: "length"} and verdict.value["conditions"] == ["cloudy"]


def test_the_sdk_helper_parses_a_whole_answer_as_the_library_does(server: StandIn) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    seen = sdk_structured_stream(client, model="structured", messages=ASK, response_format=Weather)
    assert seen.raised is None and seen.parsed == Weather(**STRUCTURED_ANSWER)
    assert seen.verdict.complete and seen.verdict.value == STRUCTURED_ANSWER
    assert {"city": "Paris"} in seen.partials and seen.partials[-1] == STRUCTURED_ANSWER


def test_the_sdk_helper_raises_a_parse_error_where_the_library_says_incomplete(server: StandIn) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    seen = sdk_structured_stream(client, model="structured-cut", messages=ASK, response_format=Weather)
    assert seen.raised_type == "LengthFinishReasonError" and "Could not parse" in (seen.raised or "")
    assert seen.parsed is None and seen.finish_reason == "length"
    assert seen.verdict.status == "incomplete" and seen.verdict.value == seen.partials[-1]
    assert seen.content == json.dumps(STRUCTURED_ANSWER, separators=(",", ":"), ensure_ascii=False)[: len(seen.content)]
