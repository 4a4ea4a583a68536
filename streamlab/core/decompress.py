"""A body's Content-Encoding undone under a bound: a decompression bomb stops at the limit (sans-IO core).

httpx decodes a compressed body a network read at a time, and each read is decoded whole: an 8.5 KB body
sent with `Content-Encoding: gzip, gzip` (a gigabyte of zeros, compressed twice) comes out of one read as
one gigabyte, before any cap of the caller's can look at it. `streamlab check` reached 2.1 GB despite its
4 MiB cap, and the client's 1 MiB error-body cap about 1 GB.

`BoundedDecoder(content_encoding, limit)` undoes every layer itself, innermost last, and never asks a layer
for more than `step` bytes at once (zlib's `max_length`), so each step holds at most `step` bytes per layer,
whatever the compression ratio. `feed(raw)` yields the decoded pieces lazily: a reader that handles each
piece before asking for the next holds one piece at a time, however large the body is. The decoded bytes
are counted after the last layer; once `limit` would be passed, the piece that reaches it is cut there,
`exceeded` becomes True, and nothing more comes out.

Codings: `identity`, `gzip` (and `x-gzip`, several members too), `deflate` (zlib-wrapped, or raw as some
servers send it), in any stack. Another coding (`br`, `zstd`, a typo) raises `EncodingError` (a
`StreamlabError` and a `ValueError`) when the decoder is made, so a caller can refuse the body rather than
hand compressed bytes on as if they were the text; bytes that are not valid in their coding raise it while
feeding.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

from streamlab.core.errors import EncodingError

__all__ = ["BoundedDecoder", "codings_of", "DEFAULT_STEP"]

DEFAULT_STEP = 64 * 1024
"""The most bytes a layer is asked for at once: what one decoding step can hold per layer."""


def codings_of(content_encoding: str | None) -> list[str]:
    """The codings of a Content-Encoding header, in the order they were applied (`identity` left out)."""
    if not content_encoding:
        return []
    names = [part.strip().lower() for part in content_encoding.split(",")]
    return [name for name in names if name and name != "identity"]


class _Layer:
    """One coding undone incrementally (gzip or deflate), asked for at most `step` bytes at a time."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self.d = self._new()
        self.started = False

    def _new(self) -> Any:
        return zlib.decompressobj(16 + zlib.MAX_WBITS if self.coding in ("gzip", "x-gzip") else zlib.MAX_WBITS)

    def pieces(self, data: bytes, step: int) -> Iterator[bytes]:
        while data:
            try:
                out = self.d.decompress(data, step)
            except zlib.error as exc:
                if self.coding == "deflate" and not self.started:  # raw deflate, without the zlib wrapper
                    self.d = zlib.decompressobj(-zlib.MAX_WBITS)
                    self.started = True
                    continue
                raise EncodingError(f"the body is not valid {self.coding}: {exc}") from exc
            self.started = True
            data = self.d.unconsumed_tail
            if out:
                yield out
            if self.d.eof:
                data = self.d.unused_data  # another gzip member, or trailing bytes
                if data and self.coding in ("gzip", "x-gzip"):
                    self.d = self._new()
                    continue
                return


class BoundedDecoder:
    """Undo `content_encoding`'s layers, yielding at most `limit` decoded bytes in all (None: no bound)."""

    def __init__(self, content_encoding: str | None, limit: int | None = None, *, step: int = DEFAULT_STEP) -> None:
        codings = codings_of(content_encoding)
        unknown = [c for c in codings if c not in ("gzip", "x-gzip", "deflate")]
        if unknown:
            raise EncodingError(
                f"cannot decode Content-Encoding {', '.join(unknown)!s} (streamlab decodes gzip and deflate)"
            )
        if limit is not None and limit < 0 or step < 1:
            raise ValueError(f"limit must be >= 0 (or None) and step >= 1, got {limit!r}, {step!r}")
        self.layers = [_Layer(c) for c in reversed(codings)]  # the last coding applied is undone first
        self.limit = limit
        self.step = step
        self.decoded = 0  # bytes yielded so far
        self.exceeded = False  # True once the body had more than `limit` decoded bytes

    def feed(self, raw: bytes) -> Iterator[bytes]:
        """The decoded pieces of the next raw bytes (lazily, each at most `step` bytes)."""
        if self.exceeded or not raw:
            return
        for piece in self._through(raw, 0):
            if self.limit is not None and self.decoded + len(piece) > self.limit:
                keep = self.limit - self.decoded
                self.exceeded = True
                self.decoded += keep
                if keep:
                    yield piece[:keep]
                return
            self.decoded += len(piece)
            yield piece

    def _through(self, data: bytes, depth: int) -> Iterator[bytes]:
        if depth == len(self.layers):
            for start in range(0, len(data), self.step):
                yield data[start : start + self.step]
            return
        for piece in self.layers[depth].pieces(data, self.step):
            yield from self._through(piece, depth + 1)
