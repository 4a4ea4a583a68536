"""Render batching on a live stream: repaint a widget at most every N ms, the first words at once (tools layer).

`streamlab.core.batching.Batcher` decides when to paint; this module runs it against the clock with asyncio.
`render_batched(deltas, paint, interval=0.05)` reads an async iterator of text deltas and calls `paint(text so
far)` whenever the batcher says so, with a timer for held text; it returns the `Flush`es it made, timed from
its start, for `streamlab.core.batching.render_stats`. `chat_deltas(stream)` turns the library's async Chat
stream into text deltas, and `side_by_side(deltas)` paints one stream into two ipywidgets at once, every
delta on the left and batched on the right, with a repaint counter under each.

    async with astream_chat(server.base_url, body) as stream:
        flushes = await render_batched(chat_deltas(stream), print_over, interval=0.05)
"""

from __future__ import annotations

import asyncio
import html
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable

import ipywidgets as w

from streamlab.core.accumulate import ChatAccumulator
from streamlab.core.batching import DEFAULT_INTERVAL, Batcher, Flush, render_stats
from streamlab.core.reading import TimedEvent

__all__ = ["render_batched", "chat_deltas", "side_by_side", "SideBySide"]


async def render_batched(
    deltas: AsyncIterable[str],
    paint: Callable[[str], None],
    *,
    interval: float = DEFAULT_INTERVAL,
    clock: Callable[[], float] = time.perf_counter,
) -> list[Flush]:
    """Paint `deltas` as they come, at most once per `interval` seconds, the first at once; returns the flushes
    (times in seconds since the call). `paint` gets the whole text shown so far."""
    batcher = Batcher(interval)
    start = clock()
    shown: list[str] = []
    flushes: list[Flush] = []

    def emit(flush: Flush | None) -> None:
        if flush is not None:
            flushes.append(flush)
            shown.append(flush.text)
            paint("".join(shown))

    source = aiter(deltas)
    pending: asyncio.Future[str] | None = asyncio.ensure_future(anext(source))
    try:
        while pending is not None:
            due = batcher.next_due
            timeout = None if due is None else max(0.0, due - (clock() - start))
            done, _ = await asyncio.wait({pending}, timeout=timeout)
            now = clock() - start
            if pending in done:
                try:
                    text = pending.result()
                except StopAsyncIteration:
                    pending = None
                    break
                pending = asyncio.ensure_future(anext(source))
                emit(batcher.feed(text, now))
            else:
                emit(batcher.tick(now))
        due = batcher.next_due
        if due is not None:  # the stream ended with text held: it is painted when due
            await asyncio.sleep(max(0.0, due - (clock() - start)))
            emit(batcher.tick(max(due, clock() - start)))
    finally:
        if pending is not None:
            pending.cancel()
            await asyncio.gather(pending, return_exceptions=True)
    return flushes


async def chat_deltas(events: AsyncIterable[TimedEvent]) -> AsyncIterator[str]:
    """The text each Chat Completions event adds (choice 0), from the library's async stream; events that add
    none (the role chunk, the usage chunk, `[DONE]`) yield nothing."""
    acc = ChatAccumulator()
    seen = 0
    async for timed in events:
        acc.feed(timed.event)
        text = acc.text.get(0, "")
        if len(text) > seen:
            yield text[seen:]
            seen = len(text)


class SideBySide:
    """Two text panes fed by one stream: every delta on the left, batched on the right (`widget` to display,
    `run(deltas)` to play a stream into both; `flushes` holds what each pane did)."""

    def __init__(self, interval: float = DEFAULT_INTERVAL) -> None:
        self.interval = interval
        self.labels = ("every delta", f"batched every {interval * 1000:g} ms")
        layout = w.Layout(width="48%", min_height="9em", border="1px solid #ccc", padding="4px")
        self.panes = [w.HTML(layout=layout) for _ in self.labels]
        self.counters = [w.HTML() for _ in self.labels]
        columns = [
            w.VBox([w.HTML(f"<b>{html.escape(label)}</b>"), pane, counter], layout=w.Layout(width="49%"))
            for label, pane, counter in zip(self.labels, self.panes, self.counters)
        ]
        self.widget = w.HBox(columns)
        self.flushes: dict[str, list[Flush]] = {}

    def _painter(self, k: int) -> Callable[[str], None]:
        count = [0]

        def paint(text: str) -> None:
            count[0] += 1
            self.panes[k].value = f"<div style='white-space: pre-wrap'>{html.escape(text)}</div>"
            self.counters[k].value = f"{count[0]} repaints"

        return paint

    async def run(self, deltas: AsyncIterable[str]) -> dict[str, str]:
        """Play `deltas` into both panes at once; returns each pane's stats line."""
        queues: list[asyncio.Queue[str | None]] = [asyncio.Queue() for _ in self.labels]

        async def tee() -> None:
            try:
                async for text in deltas:
                    for q in queues:
                        q.put_nowait(text)
            finally:
                for q in queues:
                    q.put_nowait(None)

        async def drain(q: asyncio.Queue[str | None]) -> AsyncIterator[str]:
            while (text := await q.get()) is not None:
                yield text

        intervals = (0.0, self.interval)
        results = await asyncio.gather(
            tee(), *(render_batched(drain(q), self._painter(k), interval=intervals[k]) for k, q in enumerate(queues))
        )
        self.flushes = {label: flushes for label, flushes in zip(self.labels, results[1:]) if flushes is not None}
        return {label: render_stats(flushes).line() for label, flushes in self.flushes.items()}


def side_by_side(interval: float = DEFAULT_INTERVAL) -> SideBySide:
    """A `SideBySide` for a notebook: display `view.widget`, then `await view.run(deltas)`."""
    return SideBySide(interval)
