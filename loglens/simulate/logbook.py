"""Collects log lines from all simulated processes and interleaves them by time.

SGLang's processes share one host clock, so a merged stdout+stderr log is (almost) time
ordered; lines written at the same instant keep the order in which they were produced.  The
book also counts lines per family (the store's tables: decode, prefill, http, events) so the
truth can say exactly what a lossless ingest must find.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

FAMILIES = ("decode", "prefill", "http", "events", "blank")
#: stands for the client's ephemeral port in an access line until the log is rendered; ports are
#: then handed out in time order (the kernel gives successive connections rising port numbers)
PORT = "\x00port\x00"


@dataclass(slots=True)
class Entry:
    t: float
    seq: int
    family: str  # one of FAMILIES
    lines: tuple[str, ...]  # first line carries the prefix; the rest are continuation lines
    kind: str = ""  # finer label for events (e.g. "retract", "deprecation", "traceback")
    continuation: bool = False  # a prefix-less line that belongs to the previous record (tqdm)


class LogBook:
    def __init__(self, seed: int = 0) -> None:
        self.entries: list[Entry] = []
        self._seed = seed

    def add(self, t: float, family: str, text: str | list[str], kind: str = "", continuation: bool = False) -> None:
        lines = (text,) if isinstance(text, str) else tuple(text)
        self.entries.append(Entry(t, len(self.entries), family, lines, kind, continuation))

    def ordered(self) -> list[Entry]:
        return sorted(self.entries, key=lambda e: (e.t, e.seq))

    def render(self) -> str:
        rng = random.Random(self._seed)
        port = rng.randint(33000, 52000)
        out = []
        for e in self.ordered():
            if e.family == "http" and PORT in e.lines[0]:
                port += rng.choice((1, 1, 1, 2, 3))
                if port > 60999:
                    port = 32768
                out.append(e.lines[0].replace(PORT, str(port)))
            else:
                out.extend(e.lines)
        return "\n".join(out) + "\n"

    def counts(self) -> dict[str, int]:
        """Physical lines and records per family, plus event kinds."""
        c: Counter = Counter()
        for e in self.entries:
            n = len(e.lines)
            c["lines"] += n
            if e.family == "events":
                c["event_lines"] += n
                if not e.continuation:
                    c["events"] += 1
                if e.kind:
                    c["kind:" + e.kind] += 1
            else:
                c[e.family] += n
        out = {f: c.get(f, 0) for f in FAMILIES}
        out["event_lines"] = c.get("event_lines", 0)
        out["lines"] = c.get("lines", 0)
        out["event_kinds"] = {k[5:]: v for k, v in sorted(c.items()) if k.startswith("kind:")}
        return out
