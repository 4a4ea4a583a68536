"""The split harness (sans-IO core): run SSE parsers over byte fixtures cut every way a network might.

A parser can be right on every whole stream and still wrong in production, because TCP delivers bytes
in chunks whose boundaries have nothing to do with SSE lines. The harness feeds each fixture to each
parser under four strategies:

* `whole`: one chunk (what a unit test with a string usually does);
* `byte-at-a-time`: every boundary at once;
* `every 2-way split`: one cut at each offset 0..len (cuts at 0 and len give an empty chunk);
* `random splits`: seeded multi-way cuts, duplicates allowed, so empty chunks appear too.

A cut is an offset into the raw bytes; a split is a sorted tuple of cuts. For a failing parser and
fixture, `smallest_failing_split` finds the split with the fewest cuts (then the earliest offsets),
`show_split` prints the bytes on each side of every cut, `cut_kind` says in words where a cut falls (inside a
UTF-8 character, between CR and LF...), and `split_explorer_text` shows one cut and what every contender made
of it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from streamlab.core.harness.fixtures import Fixture
from streamlab.core.sse import SSEEvent, SSEParser

__all__ = [
    "ParseResult",
    "Contender",
    "Trial",
    "Cell",
    "HarnessResult",
    "STRATEGIES",
    "ALL_FIELDS",
    "contender_from_class",
    "streamlab_contender",
    "chunks_at",
    "splits_for",
    "check",
    "run_harness",
    "smallest_failing_split",
    "show_split",
    "visible_bytes",
    "cut_kind",
    "split_kinds",
    "split_explorer_text",
]

STRATEGIES: tuple[str, ...] = ("whole", "byte-at-a-time", "every 2-way split", "random splits")
ALL_FIELDS: frozenset[str] = frozenset({"events", "retry_ms", "truncated", "last_event_id"})


@dataclass(frozen=True)
class ParseResult:
    """What a parser reported for one stream. Fields a parser does not expose are left as None."""

    events: tuple[SSEEvent, ...]
    retry_ms: int | None = None
    truncated: bool | None = None
    last_event_id: str | None = None


@dataclass(frozen=True)
class Contender:
    """A parser under test: `run(chunks)` feeds the chunks in order and returns what it reported.

    `exposes` lists the ParseResult fields this parser reports, so only those are compared (a library
    without a `truncated` flag is not marked wrong for lacking one).
    """

    name: str
    run: Callable[[Sequence[bytes]], ParseResult]
    exposes: frozenset[str] = ALL_FIELDS
    description: str = ""


def contender_from_class(name: str, factory: Callable[[], object], description: str = "") -> Contender:
    """Wrap any class with SSEParser's interface (`feed`, `close`, `retry_ms`, `last_event_id`)."""

    def run(chunks: Sequence[bytes]) -> ParseResult:
        parser = factory()
        events: list[SSEEvent] = []
        for chunk in chunks:
            events.extend(parser.feed(chunk))  # type: ignore[attr-defined]
        truncated = parser.close()  # type: ignore[attr-defined]
        return ParseResult(
            tuple(events),
            parser.retry_ms,  # type: ignore[attr-defined]
            truncated,
            parser.last_event_id,  # type: ignore[attr-defined]
        )

    return Contender(name, run, ALL_FIELDS, description or (factory.__doc__ or "").strip().split("\n")[0])


def streamlab_contender() -> Contender:
    """streamlab's own SSEParser as a contender."""
    return contender_from_class("streamlab", SSEParser, "streamlab.sse.SSEParser (the reference)")


def chunks_at(raw: bytes, cuts: Sequence[int]) -> list[bytes]:
    """Cut `raw` at the given offsets. Repeated offsets, 0 and len(raw) produce empty chunks."""
    bounds = [0, *sorted(cuts), len(raw)]
    return [raw[a:b] for a, b in zip(bounds, bounds[1:])]


def splits_for(
    raw: bytes, strategy: str, *, rng: random.Random | None = None, random_runs: int = 200, max_cuts: int = 12
) -> Iterator[tuple[int, ...]]:
    """The splits (tuples of cut offsets) a strategy tries on `raw`."""
    n = len(raw)
    if strategy == "whole":
        yield ()
    elif strategy == "byte-at-a-time":
        yield tuple(range(1, n))
    elif strategy == "every 2-way split":
        for i in range(n + 1):
            yield (i,)
    elif strategy == "random splits":
        rng = rng or random.Random(0)
        for _ in range(random_runs):
            k = rng.randint(1, max_cuts)
            yield tuple(sorted(rng.randint(0, n) for _ in range(k)))
    else:
        raise ValueError(f"unknown strategy {strategy!r}; choose from {STRATEGIES}")


@dataclass(frozen=True)
class Trial:
    """One run of one contender on one fixture under one split."""

    contender: str
    fixture: str
    strategy: str
    cuts: tuple[int, ...]
    ok: bool
    problem: str  # "" when ok; otherwise what differed or what was raised
    got: ParseResult | None


def check(contender: Contender, fixture: Fixture, cuts: Sequence[int], strategy: str = "custom") -> Trial:
    """Run one contender on one fixture cut at `cuts`; compare what it exposes with the expectation."""
    cuts = tuple(sorted(cuts))
    try:
        got = contender.run(chunks_at(fixture.raw, cuts))
    except Exception as exc:  # raising on a split counts as getting it wrong
        return Trial(contender.name, fixture.name, strategy, cuts, False, f"raised {type(exc).__name__}: {exc}", None)
    want = fixture.expected
    problems = []
    if "events" in contender.exposes and tuple(got.events) != want.events:
        problems.append(f"events {_short(got.events)} != expected {_short(want.events)}")
    if "retry_ms" in contender.exposes and got.retry_ms != want.retry_ms:
        problems.append(f"retry {got.retry_ms!r} != expected {want.retry_ms!r}")
    if "truncated" in contender.exposes and got.truncated != want.truncated:
        problems.append(f"truncated {got.truncated!r} != expected {want.truncated!r}")
    if "last_event_id" in contender.exposes and got.last_event_id != want.last_event_id:
        problems.append(f"last id {got.last_event_id!r} != expected {want.last_event_id!r}")
    return Trial(contender.name, fixture.name, strategy, cuts, not problems, "; ".join(problems), got)


def _short(events: Iterable[SSEEvent], width: int = 160) -> str:
    text = repr([(e.event, e.data, e.last_event_id) for e in events])
    return text if len(text) <= width else text[: width - 3] + "..."


@dataclass
class Cell:
    """Tally for one contender x fixture x strategy."""

    contender: str
    fixture: str
    strategy: str
    passed: int = 0
    total: int = 0
    first_failure: Trial | None = None

    @property
    def share(self) -> float:
        return self.passed / self.total if self.total else 1.0


@dataclass
class HarnessResult:
    """All tallies of one harness run, with views for tables and plots."""

    contenders: list[str]
    fixtures: list[str]
    strategies: list[str]
    cells: dict[tuple[str, str, str], Cell] = field(default_factory=dict)

    def cell(self, contender: str, fixture: str, strategy: str) -> Cell:
        return self.cells[(contender, fixture, strategy)]

    def totals(self, contender: str, strategy: str | None = None) -> tuple[int, int]:
        """(passed, total) for a contender, over all fixtures, optionally for one strategy."""
        cells = [c for c in self.cells.values() if c.contender == contender]
        if strategy is not None:
            cells = [c for c in cells if c.strategy == strategy]
        return sum(c.passed for c in cells), sum(c.total for c in cells)

    def share(self, contender: str, fixture: str) -> float:
        """Share of all runs (every strategy) of this contender on this fixture that were correct."""
        cells = [self.cells[(contender, fixture, s)] for s in self.strategies]
        total = sum(c.total for c in cells)
        return sum(c.passed for c in cells) / total if total else 1.0

    def failing_fixtures(self, contender: str) -> list[str]:
        """Fixtures with at least one wrong run, in name order."""
        return [f for f in self.fixtures if self.share(contender, f) < 1.0]

    def whole_ok_split_wrong(self, contender: str) -> list[str]:
        """Fixtures this contender gets right in one chunk but wrong under some split: chunking bugs."""
        out = []
        for f in self.fixtures:
            whole = self.cells.get((contender, f, "whole"))
            if whole is None or whole.passed != whole.total:
                continue
            if any(self.cells[(contender, f, s)].share < 1.0 for s in self.strategies if s != "whole"):
                out.append(f)
        return out

    def first_failure(self, contender: str, fixture: str) -> Trial | None:
        """The first wrong run of this contender on this fixture, in strategy order."""
        for s in self.strategies:
            trial = self.cells[(contender, fixture, s)].first_failure
            if trial is not None:
                return trial
        return None

    def summary(self) -> str:
        """A plain-text table: one row per contender and strategy with passed / total."""
        width = max(len(c) for c in self.contenders)
        lines = [f"{'parser':<{width}}  " + "  ".join(f"{s:>19}" for s in self.strategies)]
        for c in self.contenders:
            row = []
            for s in self.strategies:
                ok, n = self.totals(c, s)
                row.append(f"{ok:>9} / {n:<7}")
            lines.append(f"{c:<{width}}  " + "  ".join(f"{r:>19}" for r in row))
        return "\n".join(lines)


def run_harness(
    contenders: Sequence[Contender],
    fixtures: Sequence[Fixture],
    *,
    strategies: Sequence[str] = STRATEGIES,
    random_runs: int = 200,
    max_cuts: int = 12,
    seed: int = 20261129,
) -> HarnessResult:
    """Run every contender on every fixture under every strategy.

    Random splits are drawn from a generator seeded with `seed` and the fixture name, so every contender
    sees the same splits and results do not depend on the order of contenders or fixtures.
    """
    result = HarnessResult([c.name for c in contenders], [f.name for f in fixtures], list(strategies))
    for fixture in fixtures:
        for strategy in strategies:
            rng = random.Random(f"{seed}:{fixture.name}")
            splits = list(splits_for(fixture.raw, strategy, rng=rng, random_runs=random_runs, max_cuts=max_cuts))
            for contender in contenders:
                cell = Cell(contender.name, fixture.name, strategy)
                for cuts in splits:
                    trial = check(contender, fixture, cuts, strategy)
                    cell.total += 1
                    if trial.ok:
                        cell.passed += 1
                    elif cell.first_failure is None:
                        cell.first_failure = trial
                result.cells[(contender.name, fixture.name, strategy)] = cell
    return result


def smallest_failing_split(
    contender: Contender, fixture: Fixture, *, exhaustive_pairs_up_to: int = 600, hint: Sequence[int] | None = None
) -> tuple[int, ...] | None:
    """The failing split with the fewest cuts, then the earliest offsets; None if nothing fails.

    Zero and one cut are searched exhaustively; two cuts too when the fixture has at most
    `exhaustive_pairs_up_to` bytes. Beyond that, a known failing split (`hint`, else byte-at-a-time) is
    shrunk by dropping cuts while it still fails, then each cut is moved as early as it can go.
    """
    raw = fixture.raw
    n = len(raw)

    def fails(cuts: tuple[int, ...]) -> bool:
        return not check(contender, fixture, cuts).ok

    if fails(()):
        return ()
    for i in range(n + 1):
        if fails((i,)):
            return (i,)
    if n <= exhaustive_pairs_up_to:
        for i in range(n + 1):
            for j in range(i, n + 1):
                if fails((i, j)):
                    return (i, j)
    start = tuple(sorted(hint)) if hint is not None else tuple(range(1, n))
    if not fails(start):
        return None
    cuts = list(start)
    changed = True
    while changed:  # drop cuts one at a time while the split still fails
        changed = False
        for k in range(len(cuts)):
            trial = tuple(cuts[:k] + cuts[k + 1 :])
            if fails(trial):
                cuts = list(trial)
                changed = True
                break
    for k in range(len(cuts)):  # then move each cut as early as possible
        low = cuts[k - 1] if k else 0
        for off in range(low, cuts[k]):
            trial = tuple(cuts[:k] + [off] + cuts[k + 1 :])
            if fails(trial):
                cuts[k] = off
                break
    return tuple(cuts)


def show_split(raw: bytes, cuts: Sequence[int], context: int = 12) -> str:
    """Show the bytes on each side of every cut, escaped so CR, LF and partial characters are visible."""
    if not cuts:
        return "(no cut: the whole stream in one chunk)"
    lines = []
    for k, off in enumerate(cuts, 1):
        left = raw[max(0, off - context) : off]
        right = raw[off : off + context]
        more_l = "..." if off - context > 0 else ""
        more_r = "..." if off + context < len(raw) else ""
        lines.append(f"cut {k} at byte {off:>4}: {more_l}{visible_bytes(left)} | {visible_bytes(right)}{more_r}")
    return "\n".join(lines)


def visible_bytes(b: bytes) -> str:
    """Bytes as printable ASCII with CR, LF, backslash and every non-ASCII byte escaped (\\r, \\n, \\xNN)."""
    out = []
    for byte in b:
        if byte == 0x0A:
            out.append("\\n")
        elif byte == 0x0D:
            out.append("\\r")
        elif 0x20 <= byte < 0x7F and byte != 0x5C:
            out.append(chr(byte))
        else:
            out.append(f"\\x{byte:02x}")
    return "".join(out)


# -- describing cuts ------------------------------------------------------------------------------------

_BOM = b"\xef\xbb\xbf"


def cut_kind(raw: bytes, cut: int) -> str:
    """What a cut at byte offset `cut` of `raw` falls between, in words a test or a table can use.

    One of: "empty chunk at the start", "empty chunk at the end", "inside the BOM", "between CR and LF",
    "inside a UTF-8 character", "at the start of a line", "inside a line".
    """
    if cut <= 0:
        return "empty chunk at the start"
    if cut >= len(raw):
        return "empty chunk at the end"
    if raw.startswith(_BOM) and cut < 3:
        return "inside the BOM"
    if raw[cut - 1 : cut + 1] == b"\r\n":
        return "between CR and LF"
    if 0x80 <= raw[cut] < 0xC0:
        return "inside a UTF-8 character"
    if raw[cut - 1] in b"\r\n":
        return "at the start of a line"
    return "inside a line"


def split_kinds(raw: bytes, cuts: Sequence[int]) -> str:
    """`cut_kind` for every cut of a split, joined; "whole stream" for a split with no cut."""
    return " + ".join(cut_kind(raw, c) for c in cuts) if cuts else "whole stream"


# -- the split explorer's text (lab 02): the bytes either side of one cut and every contender's events; the
# interactive version is streamlab.tools.widgets.split_explorer


def split_explorer_text(fixture: Fixture, contenders: Sequence[Contender], cut: int, context: int = 16) -> str:
    """The explorer's checkable twin: the bytes either side of one cut and what each contender returns."""
    cut = max(0, min(cut, len(fixture.raw)))
    lines = [
        f"{fixture.name}: {len(fixture.raw)} bytes, cut at byte {cut} ({cut_kind(fixture.raw, cut)})",
        show_split(fixture.raw, [cut], context),
        f"expected: {[(e.event, e.data, e.last_event_id) for e in fixture.expected.events]!r}",
    ]
    width = max((len(c.name) for c in contenders), default=0)
    for contender in contenders:
        trial = check(contender, fixture, [cut])
        if trial.ok:
            lines.append(f"{contender.name:<{width}}  right")
        else:  # the problem says what differed (events, retry, id, truncated) or what was raised
            lines.append(f"{contender.name:<{width}}  WRONG: {trial.problem}")
    return "\n".join(lines)
