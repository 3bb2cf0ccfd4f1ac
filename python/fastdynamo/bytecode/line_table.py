"""The 3.11 location table (``co_linetable``), see CPython's ``Objects/locations.md``.

The table is a list of entries, each covering 1-8 code units with one source
location. The first byte is ``1 CCCC LLL``: code ``C`` picks the form, ``L`` is the
length minus one. Forms:

* 15: no location;  14: long form (line delta, end-line delta, column+1, end-column+1
  as varints);  13: line only (line delta);
* 10-12: one line, line delta ``C - 10``, then a column byte and an end-column byte;
* 0-9: same line, column ``C*8 + high 3 bits`` of the next byte, width in its low 4.

Line deltas are relative to the previous entry that had a line, starting from
``co_firstlineno``. We choose forms exactly like CPython's assembler, so a decoded and
re-encoded table is byte-identical to the original.

>>> from dis import Positions
>>> table = encode_line_table([(Positions(3, 3, 4, 9), 2)], first_line=3)
>>> parse_line_table(table, first_line=3)
[(2, Positions(lineno=3, end_lineno=3, col_offset=4, end_col_offset=9))]
"""
from __future__ import annotations

from dis import Positions
from typing import Iterable, Iterator

_NO_LOCATION = Positions(None, None, None, None)


def _write_varint(out: bytearray, value: int) -> None:
    # Little-endian 6-bit groups, bit 6 set when more follow.
    while value >= 64:
        out.append(64 | (value & 63))
        value >>= 6
    out.append(value)


def _write_signed_varint(out: bytearray, value: int) -> None:
    _write_varint(out, ((-value) << 1) | 1 if value < 0 else value << 1)


def _read_varint(data: Iterator[int]) -> int:
    shift = 0
    byte = next(data)
    value = byte & 63
    while byte & 64:
        shift += 6
        byte = next(data)
        value |= (byte & 63) << shift
    return value


def _read_signed_varint(data: Iterator[int]) -> int:
    value = _read_varint(data)
    return -(value >> 1) if value & 1 else value >> 1


def _write_entry(out: bytearray, pos: Positions, length: int, line: int) -> int:
    """Write one entry of ``length`` (1..8) code units; return the new current line."""
    def head(code: int) -> None:
        out.append(0x80 | (code << 3) | (length - 1))

    if pos.lineno is None:
        head(15)
        return line
    line_delta = pos.lineno - line
    column, end_column = pos.col_offset, pos.end_col_offset
    end_line = pos.end_lineno if pos.end_lineno is not None else pos.lineno
    if column is None or end_column is None or end_line < pos.lineno:
        head(13)
        _write_signed_varint(out, line_delta)
        return pos.lineno
    if end_line == pos.lineno:
        if line_delta == 0 and column < 80 and 0 <= end_column - column < 16:
            head(column >> 3)
            out.append(((column & 7) << 4) | (end_column - column))
            return line
        if 0 <= line_delta < 3 and column < 128 and end_column < 128:
            head(10 + line_delta)
            out.append(column)
            out.append(end_column)
            return pos.lineno
    head(14)
    _write_signed_varint(out, line_delta)
    _write_varint(out, end_line - pos.lineno)
    _write_varint(out, column + 1)
    _write_varint(out, end_column + 1)
    return pos.lineno


def encode_line_table(runs: Iterable[tuple[Positions, int]], first_line: int) -> bytes:
    """Encode ``(positions, size in code units)`` per instruction as ``co_linetable``.

    Like CPython 3.11's assembler, every instruction (with its EXTENDED_ARG prefixes
    and CACHE units) gets its own entries, split in chunks of at most 8 units, even
    when its neighbour has the same location.
    """
    out = bytearray()
    line = first_line
    for pos, size in runs:
        while size > 0:
            chunk = min(size, 8)
            line = _write_entry(out, pos, chunk, line)
            size -= chunk
    return bytes(out)


def parse_line_table(table: bytes, first_line: int) -> list[tuple[int, Positions]]:
    """Decode ``co_linetable`` into ``(length in code units, positions)`` entries."""
    data = iter(table)
    line = first_line
    entries = []
    for first in data:
        code = (first >> 3) & 15
        length = (first & 7) + 1
        if code == 15:
            entries.append((length, _NO_LOCATION))
            continue
        if code == 14:
            line += _read_signed_varint(data)
            end_line = line + _read_varint(data)
            column = _read_varint(data) - 1
            end_column = _read_varint(data) - 1
            entries.append((length, Positions(line, end_line,
                                              None if column < 0 else column,
                                              None if end_column < 0 else end_column)))
        elif code == 13:
            line += _read_signed_varint(data)
            entries.append((length, Positions(line, line, None, None)))
        elif code >= 10:
            line += code - 10
            column, end_column = next(data), next(data)
            entries.append((length, Positions(line, line, column, end_column)))
        else:
            second = next(data)
            column = (code << 3) | (second >> 4)
            entries.append((length, Positions(line, line, column, column + (second & 15))))
    return entries
