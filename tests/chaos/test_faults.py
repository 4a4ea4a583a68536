"""The chaos proxy's decisions, made without sockets: limits, slices, bandwidth, latency, option strings."""

from __future__ import annotations

import random

import pytest

from streamlab.core.chaos import (
    ORDER,
    Action,
    Direction,
    FaultSpec,
    parse_bandwidth,
    parse_byte_count,
    parse_hostport,
    parse_latency,
    parse_slice,
)
from streamlab.core.errors import FaultSpecError, StreamlabError

UP, DOWN = Direction.UP, Direction.DOWN
TEXT = "naïve café: 日本語 and emoji 🎉, ".encode() * 20


def feed_all(faults, chunks):
    """Feed chunks; return the bytes that pass, the write sizes, and the batches."""
    batches = [faults.feed(c) for c in chunks]
    passed = b"".join(p.data for b in batches for p in b.pieces)
    return passed, [len(p.data) for b in batches for p in b.pieces], batches


def random_chunks(data: bytes, rng: random.Random) -> list[bytes]:
    chunks, at = [], 0
    while at < len(data):
        size = rng.randint(1, 200)
        chunks.append(data[at : at + size])
        at += size
    return chunks


# --- limits ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("action", list(Action))
def test_a_limit_passes_exactly_n_bytes_then_fires_once_and_drops_the_rest(action):
    spec = FaultSpec(**{f"{action.value}_after": 250})
    faults = spec.for_connection(0, DOWN)
    passed, _, batches = feed_all(faults, [TEXT[:100], TEXT[100:300], TEXT[300:600]])
    assert passed == TEXT[:250]
    assert [b.then for b in batches] == [None, action, None]
    assert [b.dropped for b in batches] == [0, 50, 300]
    assert (faults.passed, faults.dropped, faults.fired) == (250, 350, action)
    assert faults.stalled is (action is Action.STALL)


def test_a_limit_reached_exactly_at_a_chunk_end_fires_with_that_chunk():
    faults = FaultSpec(cut_after=100).for_connection(0, DOWN)
    first = faults.feed(TEXT[:100])
    assert first.then is Action.CUT and first.size == 100 and first.dropped == 0
    assert faults.feed(b"more").dropped == 4


def test_a_limit_of_zero_fires_at_the_start_before_any_byte():
    faults = FaultSpec(reset_after=0).for_connection(0, DOWN)
    assert faults.at_start() is Action.RESET
    assert faults.at_start() is None  # once
    assert faults.feed(b"abc").size == 0


def test_faults_for_the_other_direction_are_inert():
    spec = FaultSpec(direction="up", cut_after=5, slice_sizes=(1, 2), latency_ms=50, bandwidth=10)
    down = spec.for_connection(0, DOWN)
    batch = down.feed(TEXT)
    assert [p.data for p in batch.pieces] == [TEXT] and batch.pieces[0].delay == 0 and batch.pieces[0].gap == 0
    assert down.at_start() is None and down.slices is None
    up = spec.for_connection(0, UP)
    assert up.feed(TEXT).size == 5


def test_both_directions_have_their_own_counters():
    spec = FaultSpec(direction="both", cut_after=10)
    up, down = spec.for_connection(0, UP), spec.for_connection(0, DOWN)
    assert up.feed(b"x" * 8).then is None
    assert down.feed(b"y" * 8).then is None
    assert up.feed(b"x" * 8).then is Action.CUT and up.passed == 10
    assert down.passed == 8 and down.fired is None


# --- slicing --------------------------------------------------------------------------------------------------


def test_slices_are_between_min_and_max_and_lose_nothing():
    faults = FaultSpec(slice_sizes=(2, 5), seed=3).for_connection(0, DOWN)
    passed, sizes, _ = feed_all(faults, [TEXT])
    assert passed == TEXT
    assert all(2 <= s <= 5 for s in sizes[:-1]) and 1 <= sizes[-1] <= 5


def test_the_same_seed_cuts_at_the_same_stream_offsets_however_the_bytes_arrive():
    spec = FaultSpec(slice_sizes=(1, 9), seed=42)

    def cut_offsets(chunks):
        _, sizes, _ = feed_all(spec.for_connection(7, DOWN), chunks)
        offsets, at = set(), 0
        for s in sizes[:-1]:
            at += s
            offsets.add(at)
        return offsets

    planned = set(spec.slice_plan(7, DOWN).offsets(len(TEXT)))
    assert cut_offsets([TEXT]) == planned
    for trial in range(5):  # other arrivals only add cuts at their own chunk boundaries
        chunks = random_chunks(TEXT, random.Random(trial))
        boundaries = {sum(len(c) for c in chunks[:i]) for i in range(1, len(chunks))}
        assert cut_offsets(chunks) == planned | boundaries


def test_the_plan_depends_on_seed_connection_and_direction():
    def plan(seed, connection, way):
        return FaultSpec(slice_sizes=(1, 9), seed=seed, direction="both").slice_plan(connection, way).split(500)

    assert plan(1, 0, DOWN) == plan(1, 0, DOWN)
    assert plan(1, 0, DOWN) != plan(2, 0, DOWN)
    assert plan(1, 0, DOWN) != plan(1, 1, DOWN)
    assert plan(1, 0, DOWN) != plan(1, 0, UP)


def test_one_byte_slices_cut_inside_utf8_characters():
    offsets = FaultSpec(slice_sizes=(1, 3), seed=1).slice_plan(0, DOWN).offsets(len(TEXT))
    inside = [o for o in offsets if TEXT[o] & 0xC0 == 0x80]  # the byte after the cut continues a character
    assert inside, "no cut fell inside a multi-byte character"
    with pytest.raises(UnicodeDecodeError):
        TEXT[: inside[0]].decode()


def test_the_plan_records_every_size_it_drew():
    faults = FaultSpec(slice_sizes=(4, 4)).for_connection(0, DOWN)
    faults.feed(b"x" * 10)
    assert faults.slices.planned == [4, 4, 4]  # the last slice is unfinished: 2 of its 4 bytes came
    faults.feed(b"x" * 2)
    assert faults.slices.planned == [4, 4, 4]


# --- bandwidth and latency ----------------------------------------------------------------------------------------


def test_bandwidth_splits_into_tenth_of_a_second_writes_and_reserves_their_time():
    faults = FaultSpec(bandwidth=1000).for_connection(0, DOWN)
    batch = faults.feed(b"z" * 450)
    assert [len(p.data) for p in batch.pieces] == [100, 100, 100, 100, 50]
    assert [p.gap for p in batch.pieces] == [0.1, 0.1, 0.1, 0.1, 0.05]


def test_slices_then_bandwidth_then_the_slice_delay():
    faults = FaultSpec(slice_sizes=(30, 30), slice_delay_ms=2, bandwidth=100).for_connection(0, DOWN)
    batch = faults.feed(b"z" * 60)
    assert [len(p.data) for p in batch.pieces] == [10, 10, 10, 10, 10, 10]  # 30-byte slices, 10-byte quanta
    assert all(p.gap == pytest.approx(0.1 + 0.002) for p in batch.pieces)


def test_latency_is_the_same_for_every_write_without_jitter():
    batch = FaultSpec(latency_ms=120, slice_sizes=(3, 3)).for_connection(0, DOWN).feed(b"q" * 12)
    assert [p.delay for p in batch.pieces] == [0.12] * 4


def test_jitter_stays_within_its_bounds_never_negative_and_repeats_with_the_seed():
    spec = FaultSpec(latency_ms=10, jitter_ms=30, slice_sizes=(1, 1), seed=5)
    delays = [p.delay for p in spec.for_connection(0, DOWN).feed(b"j" * 400).pieces]
    assert all(0.0 <= d <= 0.040 for d in delays)
    assert min(delays) == 0.0 and max(delays) > 0.030  # clamped at zero; reaches the top of the range
    assert delays == [p.delay for p in spec.for_connection(0, DOWN).feed(b"j" * 400).pieces]


def test_the_order_is_documented_and_fixed():
    assert ORDER == ("limit", "slice", "bandwidth", "latency")


# --- the spec -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "option", "says"),
    [
        ({"direction": "sideways"}, "direction", "'down', 'up' or 'both'"),
        ({"latency_ms": -1}, "latency_ms", "0 or more"),
        ({"jitter_ms": float("nan")}, "jitter_ms", "finite"),
        ({"bandwidth": 0}, "bandwidth", "1 or more"),
        ({"slice_sizes": (5, 2)}, "slice_sizes", "MIN must not be larger than MAX"),
        ({"slice_sizes": (0, 2)}, "slice_sizes", "1 or more"),
        ({"slice_sizes": (1, 2, 3)}, "slice_sizes", "a pair"),
        ({"slice_delay_ms": 3}, "slice_delay_ms", "needs slice_sizes"),
        ({"cut_after": -5}, "cut_after", "0 or more"),
        ({"cut_after": 1.5}, "cut_after", "whole number"),
        ({"cut_after": 10, "stall_after": 20}, "stall_after", "only one of"),
        ({"seed": "1"}, "seed", "whole number"),
    ],
)
def test_bad_options_name_the_option_and_the_problem(kwargs, option, says):
    with pytest.raises(FaultSpecError, match=says) as info:
        FaultSpec(**kwargs)
    assert info.value.option == option and str(info.value).startswith(f"{option}=")
    assert isinstance(info.value, StreamlabError) and isinstance(info.value, ValueError)


def test_describe_names_every_fault_set():
    assert FaultSpec().describe() == "no faults"
    spec = FaultSpec(
        direction="both",
        seed=9,
        latency_ms=100,
        jitter_ms=20,
        bandwidth=5000,
        slice_sizes=(1, 8),
        slice_delay_ms=1,
        stall_after=300,
    )
    assert spec.describe() == (
        "both: latency 100 ms ± 20 ms, bandwidth 5000 bytes/s, slices of 1-8 bytes, "
        "1 ms apart, stall after 300 bytes; seed 9"
    )
    assert FaultSpec(cut_after=0).active and not FaultSpec(seed=3).active


# --- option strings -------------------------------------------------------------------------------------------------


def test_option_strings_parse():
    assert parse_hostport("127.0.0.1:8000") == ("127.0.0.1", 8000)
    assert parse_hostport("localhost:1") == ("localhost", 1)
    assert parse_hostport("[::1]:8080") == ("::1", 8080)
    assert parse_latency("100") == (100.0, 0.0)
    assert parse_latency("100:20.5") == (100.0, 20.5)
    assert parse_slice("1:8") == ((1, 8), 0.0)
    assert parse_slice("2:2:0.5") == ((2, 2), 0.5)
    assert parse_byte_count("1_000", option="--cut-after") == 1000
    assert parse_byte_count("0", option="--cut-after") == 0
    assert parse_bandwidth("2048") == 2048


@pytest.mark.parametrize(
    ("parse", "text", "option", "says"),
    [
        (parse_hostport, "8000", "--upstream", "HOST:PORT"),
        (parse_hostport, "host:0", "--upstream", "between 1 and 65535"),
        (parse_hostport, "http://host:80", "--upstream", "HOST:PORT"),
        (parse_latency, "fast", "--latency", "MS or MS:JITTER"),
        (parse_latency, "-5", "--latency", "MS or MS:JITTER"),
        (parse_slice, "8", "--slice", "MIN:MAX"),
        (parse_slice, "0:8", "--slice", "MIN must be 1 or more"),
        (parse_slice, "9:8", "--slice", "not larger than MAX"),
        (parse_bandwidth, "0", "--bandwidth", "1 or more"),
        (parse_bandwidth, "1k", "--bandwidth", "whole number"),
    ],
)
def test_bad_option_strings_say_what_and_where(parse, text, option, says):
    with pytest.raises(FaultSpecError, match=says) as info:
        parse(text)
    assert info.value.option == option and info.value.value == text


def test_a_byte_count_refuses_non_ascii_digits():
    with pytest.raises(FaultSpecError, match="--stall-after='١٢'"):
        parse_byte_count("١٢", option="--stall-after")
