"""The one base of the library's vocabularies: a str enum that reads, prints and hashes as its word (sans-IO core).

`Ending`, `Outcome`, the checker's `Status`, the breaker's `State`/`Signal`/`Health`, the fallback's `Move`,
the chaos plan's `Direction`/`Action`/`ConnectionEnd`, the relay's `Due` and the engine's `Read` are all
`Word`s, so every one of them behaves the same way:

* it equals its value (`Ending.COMPLETE == "complete"`) and hashes like it (`"complete" in {Ending.COMPLETE}`),
  so a record read back from JSON compares with the enum it was written from;
* `str()`, f-strings and `repr()` give the word itself, so printed lists, tables and log lines stay readable
  (`['complete', 'client_gone']`, never `[<Ending.COMPLETE: 'complete'>, ...]`).
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Word"]


class Word(str, Enum):
    """A str enum that is its word: equal to, hashed, printed and shown as its value."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return repr(self.value)
