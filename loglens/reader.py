"""Bytes of a log file → frames of physical lines, without a per-line Python loop.

A chunk of complete lines is validated as UTF-8 (invalid bytes become U+FFFD), the newline
positions are read from a bitmap polars makes (numpy popcounts, see `_newline_positions`), and
the lines become an Arrow string array that points into the chunk's own buffer (zero-copy)
before polars takes it.  `\\r\\n` endings and a trailing
`\\r` are removed; a `\\r` inside a line (tqdm) stays part of that line.
"""

from __future__ import annotations

import os
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from loglens.gz import GzipReader, isize

#: each parse step has a fixed cost (~15 ms of planning and Python per feed) that larger chunks
#: spread over more bytes: 40 MiB chunks took ~5 % less CPU than 32 MiB on a 1 GiB log, with
#: peak memory ~0.65 GiB (a log mixing every release's shapes: ~0.8 GiB; 48 MiB came near 1 GiB)
CHUNK_BYTES = 40 * 1024 * 1024
HEAD_BYTES = 64 * 1024
TAIL_BYTES = 4096
#: string views address their buffer with 32-bit offsets: a chunk this large (only a single line
#: of over 2 GiB makes one) has its lines copied one by one instead
VIEW_LIMIT = 2**31


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def open_bytes(path: Path):
    """The file's content as a binary file object (a .gz file's decompressed: see loglens.gz)."""
    return GzipReader(path) if is_gzip(path) else open(path, "rb")


def logical_size(path: Path) -> int:
    """Size of the (uncompressed) content: for a .gz file, one pass of decompression."""
    if not is_gzip(path):
        return path.stat().st_size
    n = 0
    scratch = bytearray(CHUNK_BYTES)
    with GzipReader(path) as f:
        while got := f.readinto(scratch):
            n += got
    return n


def size_hint(path: Path) -> int:
    """The content size without reading it (a .gz file's trailer: an estimate, for progress)."""
    return isize(path) if is_gzip(path) else path.stat().st_size


def read_range(path: Path, start: int, length: int) -> bytes:
    with open_bytes(path) as f:
        if start:
            f.seek(start)
        return f.read(length)


def sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


#: the columns of a lines frame; `_first` is each line's first byte (0 for an empty line), read
#: here in one gather so that the parser's tests on a line's first character (blank, Ray's
#: `(`, an unprefixed `#running-req`) cost no pass over every line's text
LINES_SCHEMA = {"line_no": pl.Int64, "byte_off": pl.Int64, "line": pl.String, "_first": pl.UInt8}


def lines_frame(chunk: bytes, first_line_no: int, first_byte: int, newlines: np.ndarray | None = None) -> pl.DataFrame:
    """`chunk` (every line ends with `\\n`, except possibly the last) → `line_no`, `byte_off`,
    `line`, `_first`.  `newlines`: where the chunk's `\\n` are, if already known (`Chunk`)."""
    if not len(chunk):
        return pl.DataFrame(schema=LINES_SCHEMA)
    starts, stops = _line_bounds(chunk, newlines)
    byte_off = starts + first_byte  # file offsets, from the bytes as they are on disk
    if not _is_ascii(chunk):
        try:
            str(chunk, "utf-8")
        except UnicodeDecodeError:
            # U+FFFD replaces invalid bytes; a newline is never part of an invalid sequence, so
            # the repaired text has the same lines, only their byte lengths differ
            chunk = str(chunk, "utf-8", errors="replace").encode("utf-8")
            starts, stops = _line_bounds(chunk)
    n = len(starts)
    arr = np.frombuffer(chunk, dtype=np.uint8)
    first = arr[np.minimum(starts, len(arr) - 1)]  # (an unterminated empty last line starts at the end)
    first[stops == starts] = 0
    return pl.DataFrame(
        {
            "line_no": pl.int_range(first_line_no, first_line_no + n, eager=True, dtype=pl.Int64),
            "byte_off": pl.Series(byte_off, dtype=pl.Int64),
            "line": _series(_string_views(chunk, starts, stops)) if len(chunk) < VIEW_LIMIT
            else pl.Series([str(chunk[a:b], "utf-8") for a, b in zip(starts, stops)], dtype=pl.String),
            "_first": pl.Series(first, dtype=pl.UInt8),
        }
    )


class _ArrowArray:
    """An Arrow array offered through the Arrow C data interface only, which polars takes as it
    is (`pl.from_arrow` would import pyarrow.compute first: ~25 ms at every start)."""

    def __init__(self, array: pa.Array):
        self.array = array

    def __arrow_c_array__(self, requested_schema=None):
        return self.array.__arrow_c_array__(requested_schema)


def _series(array: pa.Array) -> pl.Series:
    return pl.Series(_ArrowArray(array))


def _is_ascii(chunk) -> bool:
    # polars' max over the bytes (SIMD): faster than `bytes.isascii`, and works on a memoryview too
    if len(chunk) < SERIES_LIMIT:
        return (_byte_series(chunk).max() or 0) < 128
    return int(np.frombuffer(chunk, dtype=np.uint8).max(initial=0)) < 128


#: polars numbers a series' rows with 32 bits: the bytes of a chunk this large are searched with numpy
SERIES_LIMIT = 2**31


def _byte_series(chunk) -> pl.Series:
    """The bytes of `chunk` as a UInt8 series (no copy)."""
    return _series(pa.Array.from_buffers(pa.uint8(), len(chunk), [None, pa.py_buffer(chunk)]))


#: more than one newline in this many bytes: numpy's own search for them is the faster one
DENSE_NEWLINES = 16


def _newline_words(chunk) -> np.ndarray:
    """Where the newlines are, as a bitmap: bit j of word i is set when `chunk[64 * i + j]` is a
    newline (polars compares straight to a bitmap, numpy would need a bool array and a pack)."""
    n = len(chunk)
    words = np.zeros(-(-n // 64), dtype="<u8")
    bits = (_byte_series(chunk) == 10).to_arrow() if n < SERIES_LIMIT else None
    if bits is not None and bits.offset == 0 and bits.buffers()[0] is None:  # a plain bitmap
        nbytes = -(-n // 8)
        words.view(np.uint8)[:nbytes] = np.frombuffer(bits.buffers()[1], dtype=np.uint8, count=nbytes)
        if n % 64:  # bits past the end are not promised to be 0
            words[-1] &= np.uint64((1 << (n % 64)) - 1)
    else:  # not the plain bitmap expected: pack one here
        packed = np.packbits(np.frombuffer(chunk, dtype=np.uint8) == 10, bitorder="little")
        words.view(np.uint8)[: len(packed)] = packed
    return words


def _newline_positions(chunk) -> np.ndarray:
    """Sorted positions of every `\\n` (int64).  `np.flatnonzero(arr == 10)` costs ~40 ns per
    newline (numpy walks the sparse bool array); instead the nonzero 64-bit words of the newline
    bitmap are found (a dense, cheap search), and each word's set bits read with popcounts: the
    lowest of every word at once, then again for the few words holding more."""
    words = _newline_words(chunk)
    nz = np.flatnonzero(words != 0)
    w = words[nz]
    count = np.bitwise_count(w)
    total = int(count.sum(dtype=np.int64))
    if total > len(chunk) // DENSE_NEWLINES:  # many empty or short lines
        return np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10)
    base = nz
    base *= 64
    first = base + _lowest_bit(w)
    if total == len(w):  # no word holds two
        return first
    out = np.empty(total, dtype=np.int64)
    at = np.cumsum(count, dtype=np.int64)
    at -= count  # where each word's first newline goes
    out[at] = first
    more = np.flatnonzero(count > 1)
    w, base, at = w[more], base[more], at[more]
    while w.size:
        w &= w - np.uint64(1)  # the lowest bit cleared
        at += 1
        out[at] = base + _lowest_bit(w)
        more = np.flatnonzero(np.bitwise_count(w) > 1)
        w, base, at = w[more], base[more], at[more]
    return out


def _lowest_bit(w: np.ndarray) -> np.ndarray:
    """Index of the lowest set bit of each (nonzero) uint64."""
    low = np.negative(w)
    low &= w  # that bit alone
    low -= np.uint64(1)  # the bits below it
    return np.bitwise_count(low)


def _line_bounds(chunk: bytes, ends: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Start and stop (exclusive, without the line ending) of every line (`ends`: the newline
    positions, if known; not changed here)."""
    arr = np.frombuffer(chunk, dtype=np.uint8)
    ends = _newline_positions(chunk) if ends is None else ends
    if len(ends) == 0 or ends[-1] != len(chunk) - 1:
        ends = np.append(ends, len(chunk))  # an unterminated last line
    starts = np.empty(len(ends), dtype=np.int64)
    starts[0] = 0
    np.add(ends[:-1], 1, out=starts[1:])
    stops = ends
    if not may_hold(chunk, b"\r"):
        return starts, stops
    # `\r\n` endings, and any run of `\r` before the end (a line is stripped of trailing \r and \n);
    # the byte before each end is read (a stop of 0 reads the chunk's last byte: filtered below)
    cr = np.flatnonzero(arr[stops - 1] == 13)
    if cr.size:
        stops = stops.copy()  # (the caller's newline positions stay as they are)
    while cr.size:
        cr = cr[stops[cr] > starts[cr]]
        stops[cr] -= 1
        cr = cr[arr[stops[cr] - 1] == 13]
    return starts, stops


def may_hold(chunk, byte: bytes) -> bool:
    """False when the chunk holds no `byte` for sure (a memchr over the bytes object, or over the
    whole object a memoryview points into: a superset of the chunk)."""
    whole = chunk.obj if isinstance(chunk, memoryview) else chunk
    return not isinstance(whole, (bytes, bytearray)) or byte in whole


#: the low k bytes of a little-endian word, k = 0..4
_LOW_BYTES = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF], dtype=np.uint32)


def _string_views(chunk: bytes, starts: np.ndarray, stops: np.ndarray) -> pa.Array:
    """An Arrow string-view array of the lines, pointing into `chunk` (no copy, no strip pass):
    16 bytes per line, `length | 4-byte prefix | buffer 0 | offset`, or the whole string inline
    when it has at most 12 bytes (Arrow's view layout, which is also polars' own)."""
    size = len(chunk)
    n = len(starts)
    length = stops - starts
    views = np.empty((n, 4), dtype=np.int32)
    views[:, 0] = length
    views[:, 2] = 0
    views[:, 3] = starts
    # 4 bytes read as one little-endian word at any byte offset (one gather for a line's prefix);
    # a chunk of under 4 bytes is read from a zero-padded copy (its lines are all short)
    src = chunk if size >= 4 else bytes(chunk) + bytes(3)
    top = len(src) - 4  # the last offset a word can be read at
    word = np.ndarray(shape=(top + 1,), dtype="<u4", buffer=src, strides=(1,))
    views[:, 1] = word[starts if starts[-1] <= top else np.minimum(starts, top)].view(np.int32)
    short = np.flatnonzero(length <= 12)
    if short.size:  # inline: the bytes themselves, zero-padded, as three words (the prefix is the first)
        first, left = starts[short], length[short]
        inline = np.empty((short.size, 3), dtype=np.uint32)
        for k in range(3):
            at = np.minimum(first, top)  # a word past the end is read lower down and shifted
            w = word[at]
            w >>= ((first - at) * 8).clip(max=24).astype(np.uint32)
            w &= _LOW_BYTES[left.clip(0, 4)]
            inline[:, k] = w
            first = first + 4
            left = left - 4
        views[short, 1:] = inline.view(np.int32)
    return pa.Array.from_buffers(pa.string_view(), n, [None, pa.py_buffer(views), pa.py_buffer(chunk)])


@dataclass
class Chunk:
    data: bytes | memoryview
    start: int  # byte offset of data[0] in the file
    complete: bool  # False for an unterminated last line
    ends_record: bool = False  # the next chunk starts with a `[` line that is no `[rankN]:` one: no record spans the cut
    lines: int = 0  # physical lines in data
    #: where data's `\n` are (found while reading, for the line count; the parser reuses them)
    newlines: np.ndarray | None = None


#: how far back from a chunk's end a cut before a `[` line is looked for
_CUT_WINDOW = 4 * 1024 * 1024
#: the one kind of line that starts with `[` and still continues the record above it: torch's
#: `[rank0]: ...` lines of a rank's traceback (the parser's continuation rule)
_RANK_LINE = re.compile(rb"\[rank[0-9]+\]:")


def _cut(data: bytes | bytearray, end: int | None = None) -> tuple[int, bool]:
    """Where to end a chunk (of `data[:end]`): before the last line near the end that starts
    with `[` and is not a `[rankN]:` line (then no record, a traceback say, spans the cut, and
    chunks parse independently), else after the last newline."""
    end = len(data) if end is None else end
    window = max(0, end - _CUT_WINDOW)
    i = data.rfind(b"\n[", window, end)
    while i >= 0 and _RANK_LINE.match(data, i + 1):
        i = data.rfind(b"\n[", window, i)
    if i >= 0:
        return i + 1, True
    return data.rfind(b"\n", 0, end) + 1, False


class _Buffers:
    """Read buffers, filled again once nothing points into them any more.

    A frame made from a chunk points into the chunk's buffer (see `lines_frame`), and CPython
    counts such views: a bytearray with a live view cannot be resized.  So a buffer is only
    refilled when every view of it — chunk, Arrow buffer, polars columns, output rows — is gone;
    until then a new one is taken.  Fresh buffers of tens of MB are costly: each is a new
    mapping whose pages the kernel zeroes on first touch (a third of an ingest's system time)."""

    def __init__(self, keep: int = 6):
        self.keep = keep
        self.free_check: list[bytearray] = []

    def get(self, size: int) -> bytearray:
        for buf in self.free_check:
            if len(buf) >= size and _unshared(buf):
                return buf
        buf = bytearray(size)
        if len(self.free_check) < self.keep:
            self.free_check.append(buf)
        return buf


def _unshared(buf: bytearray) -> bool:
    """No view of `buf` is alive (resizing a bytearray with one raises BufferError)."""
    try:
        buf.append(0)
    except BufferError:
        return False
    del buf[-1]
    return True


def iter_chunks(path: Path, start: int = 0, chunk_bytes: int = CHUNK_BYTES, problems: list[str] | None = None) -> Iterator[Chunk]:
    """Chunks of complete lines from byte `start`; a final unterminated line comes last, alone.
    `problems` gets why a .gz stream ended early, if it did (what it held is still read)."""
    if is_gzip(path):
        yield from _iter_stream_chunks(path, start, chunk_bytes, problems)
        return
    # a plain file is read again from where the previous chunk was cut (the few bytes after the
    # cut are read twice) and chunks are views of what was read: no bytes are copied
    buffers = _Buffers()
    with open(path, "rb") as f:
        pos = start
        size = chunk_bytes
        while True:
            f.seek(pos)
            # no larger than what is there (+1 to see growth): a follower reads a few lines at a
            # time, and a new buffer is zeroed in full
            buf = buffers.get(max(1, min(size, os.fstat(f.fileno()).st_size - pos + 1)))
            with memoryview(buf) as into:
                n = f.readinto(into[:size])
            if not n:
                return
            data = memoryview(buf)[:n]
            last = n < size
            cut, clean = (buf.rfind(b"\n", 0, n) + 1, False) if last else _cut(buf, n)
            if cut == 0 and not last:
                data.release()
                size *= 2  # a line longer than a chunk: read more of it
                continue
            size = chunk_bytes
            if cut:
                view = data[:cut]
                newlines = _newline_positions(view)
                yield Chunk(view, pos, True, clean, len(newlines), newlines)
                pos += cut
            if last:
                if cut < n:
                    yield Chunk(data[cut:], pos, False, False, 1)
                return
            del data, view


def _iter_stream_chunks(path: Path, start: int, chunk_bytes: int, problems: list[str] | None) -> Iterator[Chunk]:
    """`iter_chunks` for a .gz file, which cannot seek back cheaply: decompressed into reused
    buffers, as a plain file is read, with the bytes after a cut carried to the front of the
    next buffer."""
    buffers = _Buffers()
    with GzipReader(path) as f:
        if start:
            f.seek(start)
        pos = start
        carry = b""
        while True:
            room = len(carry) + chunk_bytes
            buf = buffers.get(max(room, chunk_bytes + _CUT_WINDOW))  # (one size, so buffers are reused)
            with memoryview(buf) as into:
                into[: len(carry)] = carry
                got = f.readinto(into[len(carry): room])
            n = len(carry) + got
            end = got < chunk_bytes  # the content ends in this buffer
            cut, clean = (buf.rfind(b"\n", 0, n) + 1, False) if end else _cut(buf, n)
            if cut:
                view = memoryview(buf)[:cut]
                newlines = _newline_positions(view)
                yield Chunk(view, pos, True, clean, len(newlines), newlines)
                pos += cut
                del view
            carry = bytes(buf[cut:n])  # (all of it when no line ended: a line longer than a chunk)
            if end:
                if f.problem and problems is not None:  # (before the last line: a caller stops at an unterminated one)
                    problems.append(f.problem)
                if carry:
                    yield Chunk(carry, pos, False, False, 1)
                return
