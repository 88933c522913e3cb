"""A `.gz` log's content, read with zlib directly.

`gzip.GzipFile` raises at the end of a truncated or damaged stream and keeps the data it had
decompressed so far to itself, so a log cut off while it was being compressed or copied
could not be read at all.  This reader returns every byte that decompresses, then stops and
says why (`problem`).  It also reads the compressed file in large blocks (zlib releases the
GIL while it works, so parser threads keep running) and follows concatenated members, as
`gzip` does.
"""

from __future__ import annotations

import os
import zlib

#: compressed bytes read at a time
BLOCK = 1 << 20
#: at most this many decompressed bytes per zlib call (a very compressible block is not
#: expanded into memory all at once)
STEP = 8 << 20
_GZIP_WBITS = 16 + zlib.MAX_WBITS


class GzipReader:
    """File-like reader of a .gz file's decompressed bytes: `read(n)`, `readinto(buffer)`, `seek`
    forward (by reading); `problem` is None, or why the stream ended before its end marker."""

    def __init__(self, path: str | os.PathLike):
        self._f = open(path, "rb")
        self._z = zlib.decompressobj(_GZIP_WBITS)
        self._pending = b""  # compressed bytes not yet given to zlib
        self._in_member = False  # inside a member whose end marker has not been seen
        self._buf = bytearray()
        self._pos = 0  # decompressed bytes handed out so far
        self._made = 0  # decompressed bytes zlib has given
        self._done = False
        self.problem: str | None = None

    def __enter__(self) -> "GzipReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._f.close()

    def read(self, n: int = -1) -> bytes:
        """Up to `n` bytes (all the rest for n < 0); fewer only at the end of the content."""
        if n < 0:
            parts = []
            while block := self.read(STEP):
                parts.append(block)
            return b"".join(parts)
        out = bytearray(n)
        got = self.readinto(out)
        del out[got:]
        return bytes(out)

    def readinto(self, into) -> int:
        """Fill the writable buffer `into` (fewer bytes only at the end of the content); returns
        how many were written.  Decompressed straight into it: no second copy of a chunk."""
        view = memoryview(into).cast("B")
        want, have = len(view), 0
        if self._buf:  # left from a call that zlib answered with more than was asked
            k = min(len(self._buf), want)
            view[:k] = self._buf[:k]
            del self._buf[:k]
            have = k
        while have < want and not self._done:
            piece = self._fill(want - have)
            k = min(len(piece), want - have)
            view[have:have + k] = piece[:k]
            if len(piece) > k:  # (zlib gives at least 64 KiB a call: keep the rest)
                self._buf += piece[k:]
            have += k
        view.release()
        self._pos += have
        return have

    def seek(self, offset: int) -> int:
        """Forward only, by reading (a gzip stream has no index); returns the position reached."""
        if offset < self._pos:
            raise ValueError("GzipReader seeks forward only")
        scratch = bytearray(min(offset - self._pos, STEP))
        while self._pos < offset:
            if not self.readinto(memoryview(scratch)[: offset - self._pos]):
                break
        return self._pos

    def _fill(self, want: int) -> bytes:
        """The next decompressed bytes (about `want`, at most STEP; empty when a block held none)."""
        if not self._pending:
            self._pending = self._f.read(BLOCK)
            if not self._pending:
                if self._in_member:
                    self.problem = f"the .gz stream ends early (truncated?): {self._made:,} bytes of content read"
                self._done = True
                return b""
        if not self._in_member:  # a new member starts here: only gzip, or zero padding, may follow one
            if self._pending.strip(b"\x00") == b"":
                self._pending = b""
                return b""
            if not self._pending.startswith(b"\x1f\x8b"[: len(self._pending)]):
                self.problem = f"bytes after the last .gz member are not gzip data: ignored after {self._made:,} bytes of content"
                self._done = True
                return b""
            self._in_member = True
        try:
            out = self._z.decompress(self._pending, min(max(want, 1 << 16), STEP))
        except zlib.error as e:
            self.problem = f"damaged .gz data ({e}) after {self._made:,} bytes of content"
            self._done = True
            return b""
        self._made += len(out)
        if self._z.eof:  # this member ended; another may follow
            self._pending = self._z.unused_data
            self._z = zlib.decompressobj(_GZIP_WBITS)
            self._in_member = False
        else:
            self._pending = self._z.unconsumed_tail
        return out


def isize(path: str | os.PathLike) -> int:
    """The content size a .gz file's trailer records (its last member's, modulo 2^32): a cheap
    estimate for progress bars, not an identity."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        if f.tell() < 4:
            return 0
        f.seek(-4, os.SEEK_END)
        return int.from_bytes(f.read(4), "little")
