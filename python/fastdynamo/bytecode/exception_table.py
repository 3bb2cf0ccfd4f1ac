"""The 3.11 exception table (``co_exceptiontable``), see CPython's
``Objects/exception_handling_notes.txt``.

Each entry is four numbers in code units (2 bytes): start, length, handler target
and ``depth << 1 | lasti``. Each number is written as 6-bit groups, most
significant first; bit 6 (64) says another group follows and bit 7 (128) marks the
first byte of an entry.

>>> raw = [RawExceptionEntry(start=4, end=10, target=20, depth=1, lasti=True)]
>>> parse_exception_table(encode_exception_table(raw)) == raw
True
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

_CONTINUE = 64
_ENTRY_START = 128


@dataclass(frozen=True)
class RawExceptionEntry:
    """An entry in byte offsets; ``end`` is exclusive, as in :mod:`dis`."""

    start: int
    end: int
    target: int
    depth: int
    lasti: bool


def _read_number(data: Iterator[int]) -> int:
    byte = next(data)
    value = byte & 63
    while byte & _CONTINUE:
        byte = next(data)
        value = (value << 6) | (byte & 63)
    return value


def _write_number(out: bytearray, value: int, first: bool) -> None:
    assert 0 <= value < (1 << 30), value
    groups = [value & 63]
    value >>= 6
    while value:
        groups.append(value & 63)
        value >>= 6
    groups.reverse()
    for i, group in enumerate(groups):
        byte = group
        if i < len(groups) - 1:
            byte |= _CONTINUE
        if first and i == 0:
            byte |= _ENTRY_START
        out.append(byte)


def parse_exception_table(table: bytes) -> list[RawExceptionEntry]:
    """Decode ``co_exceptiontable`` into entries with byte offsets."""
    data = iter(table)
    entries: list[RawExceptionEntry] = []
    while True:
        try:
            start = _read_number(data)
        except StopIteration:
            return entries
        length = _read_number(data)
        target = _read_number(data)
        depth_lasti = _read_number(data)
        entries.append(RawExceptionEntry(start * 2, (start + length) * 2, target * 2,
                                         depth_lasti >> 1, bool(depth_lasti & 1)))


def encode_exception_table(entries: Iterable[RawExceptionEntry]) -> bytes:
    """Encode entries (byte offsets, ``end`` exclusive) as ``co_exceptiontable``."""
    out = bytearray()
    for entry in entries:
        assert entry.end > entry.start, entry
        _write_number(out, entry.start // 2, first=True)
        _write_number(out, (entry.end - entry.start) // 2, first=False)
        _write_number(out, entry.target // 2, first=False)
        _write_number(out, (entry.depth << 1) | int(entry.lasti), first=False)
    return bytes(out)
