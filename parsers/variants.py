"""Which SGLang release range printed a batch line of a given shape.

Codes follow the tables in the project's format notes (D0..D13 for Decode, P0..P14 for
Prefill).  Shapes are told apart by the header's punctuation (`.` until v0.5.4, `,` after),
a trailing `, ` (v0.4.3.post3–v0.4.5.post3 and v0.4.9.post3–v0.5.8.post1), and marker keys
(`cuda graph` ≥ v0.4.6.post4, `largest-len` v0.4.3.post3–v0.4.4.post1, `#pending-token`
≥ v0.5.11, ...).  A shape that fits no row is reported as `?`; the line is parsed all the same.
"""

from __future__ import annotations

#: code → first..last release, for reports
RELEASES = {
    "D0": "v0.1.3–v0.1.16",
    "D1-3": "v0.1.17–v0.4.6.post3",
    "D4": "v0.4.1.post7–v0.4.3.post2",
    "D5": "v0.4.3.post3–v0.4.4.post1",
    "D6": "v0.4.4.post2–v0.4.5.post3",
    "D7": "v0.4.6–v0.4.6.post3",
    "D8": "v0.4.6.post4–v0.4.9",
    "D9": "v0.4.9.post1–v0.4.9.post2",
    "D10": "v0.4.9.post3–v0.5.3.post3",
    "D11-12": "v0.5.4–v0.5.8.post1",
    "D12": "v0.5.4.post1–v0.5.8.post1",
    "D13": "v0.5.9–current",
    "P0": "v0.1.3–v0.1.16",
    "P1-4": "v0.1.17–v0.3.1.post1",
    "P4m": "v0.2.14–v0.3.5",
    "P5": "v0.3.1.post2–v0.4.3.post2",
    "P6": "v0.4.3.post3–v0.4.5.post3",
    "P7": "v0.4.6–v0.4.9",
    "P8": "v0.4.9.post1–v0.4.9.post2",
    "P9": "v0.4.9.post3–v0.5.3.post3",
    "P6/9": "v0.4.3.post3–v0.4.5.post3 or v0.4.9.post3–v0.5.3.post3",
    "P10-11": "v0.5.4–v0.5.8.post1",
    "P12": "v0.5.9",
    "P13": "v0.5.10rc0–v0.5.10.post1",
    "P14": "v0.5.11–current",
    "?": "unknown",
}


def _has_graph(keys: list[str]) -> bool:
    return any(k.endswith(" graph") for k in keys)


def decode_variant(sep: str, trail: str, keys: list[str]) -> str:
    graph = _has_graph(keys)
    if sep == "":
        return "D0"
    if sep == ",":
        return "D11-12" if trail else "D13"
    # period header: v0.1.17 .. v0.5.3.post3
    if "timestamp" in keys:
        return "D9"
    if graph:
        return "D10" if trail else "D8"
    if "largest-len" in keys:
        return "D5"
    if trail:
        return "D6"
    if "pre-allocated usage" in keys:
        return "D7"
    if "accept len" in keys:
        return "D4"
    return "D1-3"


def prefill_variant(sep: str, trail: str, keys: list[str]) -> str:
    graph = _has_graph(keys)
    if "seq" in " ".join(keys) and "#seq" in keys:
        return "P0"
    if sep == ",":
        if graph:
            if "#pending-token" in keys:
                return "P14"
            gi = next(i for i, k in enumerate(keys) if k.endswith(" graph"))
            ti = keys.index("input throughput (token/s)") if "input throughput (token/s)" in keys else -1
            return "P12" if 0 <= ti < gi else "P13"
        return "P10-11"
    if "timestamp" in keys:
        return "P8"
    if "cache hit rate" in keys:
        if "#running-req" not in keys:
            return "P4m"
        return "P5" if "token usage" in keys else "P1-4"
    if trail:
        return "P6/9"
    if "#token" in keys:
        return "P7"
    return "P7" if "token usage" in keys else "?"
