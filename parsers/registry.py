"""The line families, each declared once with its sample lines, checked when first used.

| family  | table   | what |
|---------|---------|------|
| decode  | decode  | `Decode batch` lines of every SGLang release (and the unlabeled v0.1.3–v0.1.16 form) |
| prefill | prefill | `Prefill batch` / `Prefil batch` / `new fill batch` / `Prefill batch(mixed …)` |
| http    | http    | uvicorn access lines, with SGLang's timestamp or uvicorn's default form |
| events  | events  | everything else, typed by kind (server_args, retraction, error + traceback, …) |

Samples live in `parsers/samples/<family>.log` beside this file.  `verify_samples()` runs the
real parser over them and raises if a sample lands in the wrong table, is rejected, or (for
events) gets the wrong kind — so a change to a pattern that breaks a known release fails at
once, and a new family cannot be added without samples.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import polars as pl

SAMPLES_DIR = Path(__file__).parent / "samples"


@dataclass(frozen=True)
class Family:
    name: str
    table: str
    description: str

    @property
    def sample_file(self) -> Path:
        return SAMPLES_DIR / f"{self.name}.log"


FAMILIES = [
    Family("decode", "decode", "SGLang `Decode batch` lines, all releases"),
    Family("prefill", "prefill", "SGLang `Prefill batch` lines, all releases"),
    Family("http", "http", "uvicorn HTTP access lines"),
    Family("events", "events", "every other line, typed by kind"),
]


class SampleMismatch(AssertionError):
    pass


def sample_lines(family: Family) -> list[tuple[int, str, str | None]]:
    """(line_no in the sample file, line, expected event kind) for every sample line."""
    out, kind = [], None
    for i, line in enumerate(family.sample_file.read_text(encoding="utf-8").split("\n"), start=1):
        if line.startswith("# kind: "):
            kind = line[len("# kind: ") :].strip()
            continue
        if line.startswith("#! ") or line.startswith("# ") or not line.strip():
            continue
        out.append((i, line, kind))
    return out


@cache
def verify_samples() -> int:
    """Parse every family's samples; raise SampleMismatch on the first disagreement. Returns the count."""
    from .pipeline import LineParser  # local: the pipeline itself calls this module

    n = 0
    for fam in FAMILIES:
        samples = sample_lines(fam)
        if not samples:
            raise SampleMismatch(f"family {fam.name!r} has no sample lines in {fam.sample_file}")
        text = [s[1] for s in samples]
        frame = pl.DataFrame({"line_no": pl.int_range(1, len(text) + 1, eager=True), "line": text})
        parsed = LineParser(check=False).feed(frame, final=True)
        rejects = parsed.tables.get("rejects")
        if rejects is not None and rejects.height:
            r = rejects.row(0, named=True)
            raise SampleMismatch(f"{fam.name} sample {r['raw']!r} rejected: {r['reason']}")
        got = parsed.tables.get(fam.table)
        starts = set() if got is None else set(got.get_column("line_no").to_list())
        if fam.table != "events":
            missing = [s for k, s in enumerate(samples, start=1) if k not in starts]
            if missing:
                raise SampleMismatch(f"{fam.name} sample at {fam.sample_file.name}:{missing[0][0]} not parsed as {fam.table}: {missing[0][1]!r}")
        else:
            kinds = dict(zip(got.get_column("line_no").to_list(), got.get_column("kind").to_list()))
            for k, (src_line, line, kind) in enumerate(samples, start=1):
                if k in kinds and kind is not None and kinds[k] != kind:
                    raise SampleMismatch(f"events sample at {fam.sample_file.name}:{src_line} has kind {kinds[k]!r}, expected {kind!r}")
        n += len(samples)
    return n


def _fingerprint() -> str:
    """Identity of the parser as it is now: its sources and its samples."""
    h = hashlib.sha1()
    here = Path(__file__).parent
    for f in sorted([*here.glob("*.py"), *SAMPLES_DIR.glob("*.log")]):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


@cache
def ensure_verified() -> None:
    """`verify_samples()`, once per parser version: a marker in the user's cache directory
    remembers that this exact set of sources and samples passed, so each command does not pay
    the check again (it costs ~0.2 s); any edit to a parser module or a sample re-runs it."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "loglens"
    marker = base / f"samples-verified-{_fingerprint()}"
    if marker.exists():
        return
    verify_samples()
    try:
        base.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass  # an unwritable cache only means checking again next time
