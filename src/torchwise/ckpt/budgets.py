"""Limits on the work one file may cost, so a hostile file cannot stall a scan.

A zip member can inflate 1000:1, a pickle can be 200 million MARK opcodes, and
the memo can be asked to hold a billion entries. Every limit has a default that
no real checkpoint comes near (a state dict costs about 30 opcodes a tensor, so
5 million opcodes is some 150,000 tensors with their optimizer state, or a list
nested a million deep) and a CLI flag. ``weights_only`` itself has no limit but
memory (a million nested levels load), so nothing is refused for its shape alone:
nesting costs opcodes like everything else. Exceeding a limit is not an error: it
ends the file with the verdict **unsafe: too large to vet**, because the loader
would go on unpickling what the scan could not look at.

The limits that decide a verdict are deterministic counts (bytes, opcodes, memo
entries, nesting); wall time is a last safety net only, so a verdict never
depends on how loaded the machine is unless a file is pathological anyway.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

MIB = 1 << 20


@dataclass(frozen=True)
class Budgets:
    #: decompressed bytes of one pickle stream (skipped byte strings included)
    max_bytes: int = 1024 * MIB
    #: opcodes decoded in one file, over all its pickles and routes (each can create an object
    #: the scan holds: 5 million keeps a bomb of empty dicts near 500 MB), plus one per archive
    #: entry visited
    max_opcodes: int = 5_000_000
    #: memo entries of one pickle
    max_memo: int = 1_000_000
    #: open MARKs at once, 0 for no limit: weights_only itself nests as deep as memory allows
    #: (measured: a million levels load), so by default nesting only costs opcodes
    max_depth: int = 0
    #: wall-clock seconds for one file (a safety net; the counts above decide first)
    max_seconds: float = 60.0

    #: CLI flag -> field, in the order ``--help`` lists them
    FLAGS = (
        ("--max-bytes", "max_bytes", "decompressed bytes per pickle"),
        ("--max-opcodes", "max_opcodes", "pickle opcodes per file"),
        ("--max-memo", "max_memo", "memo entries per pickle"),
        ("--max-depth", "max_depth", "nested MARKs per pickle (0: none)"),
        ("--max-seconds", "max_seconds", "seconds per file"),
    )


DEFAULT_BUDGETS = Budgets()


class BudgetExceeded(Exception):
    """A limit was reached: the file is too large to vet."""

    def __init__(self, what: str, limit: float, offset: int = -1) -> None:
        super().__init__(f"{what} exceeds the limit of {limit:,}")
        self.what = what
        self.limit = limit
        self.offset = offset


@dataclass
class Meter:
    """Counts the work done on one file against its :class:`Budgets`."""

    budgets: Budgets = DEFAULT_BUDGETS
    opcodes: int = 0
    #: bytes decompressed or read from the file so far, over every member and nested archive
    #: (an entry that points at data another entry points at counts again)
    bytes_read: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def exhausted(self) -> bool:
        """A count budget has been reached (the file is already too large to vet)."""
        budgets = self.budgets
        return self.opcodes >= budgets.max_opcodes or self.bytes_read >= budgets.max_bytes

    def charge_bytes(self, n: int, offset: int = -1) -> None:
        self.bytes_read += n
        if self.bytes_read > self.budgets.max_bytes:
            raise BudgetExceeded(
                "the bytes decompressed from the file", self.budgets.max_bytes, offset
            )

    def charge_opcodes(self, n: int, offset: int) -> None:
        self.opcodes += n
        if self.opcodes > self.budgets.max_opcodes:
            raise BudgetExceeded("the number of opcodes", self.budgets.max_opcodes, offset)
        self.check_time(offset)

    def check_time(self, offset: int = -1) -> None:
        if time.monotonic() - self.started > self.budgets.max_seconds:
            raise BudgetExceeded("the time spent (seconds)", self.budgets.max_seconds, offset)
