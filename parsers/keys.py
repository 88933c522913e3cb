"""Key → column registry for SGLang's `key: value` batch lines.

SGLang's Decode/Prefill lines are `key: value` lists whose keys grew over 60 releases.  One
rule names every column (DESIGN.md): drop `#` and a parenthesised unit, lower-case, every
other run of non-alphanumerics becomes `_`.  A handful of legacy spellings are aliases of a
later key (listed here, so the mapping is visible in one place).  Types come from the
table schema; a key that is in no schema is "unknown": kept in `extra` and reported.
"""

from __future__ import annotations

import re

_UNIT = re.compile(r"\([^)]*\)")
_NON_ALNUM = re.compile(r"[^0-9a-z]+")

#: legacy spellings → today's column
ALIASES = {
    "seq": "new_seq",  # v0.1.3 `new fill batch. #seq: N`
    "remaining_req": "queue_req",  # v0.1.3 `#remaining_req` = waiting queue
    "tree_cache_hit_rate": "cache_hit_rate",  # v0.1.11
}

#: `<device> graph` labels: all land in `cuda_graph` (bool) + `graph_device`
GRAPH_KEY = re.compile(r"^(cuda|cpu|npu|musa|xpu|hpu|mps|[a-z]+) graph$")


def column_name(key: str) -> str:
    """`#running-req` → `running_req`, `gen throughput (token/s)` → `gen_throughput`."""
    k = key.replace("#", "")
    k = _UNIT.sub("", k).lower()
    k = _NON_ALNUM.sub("_", k).strip("_")
    return ALIASES.get(k, k)


def graph_device(key: str) -> str | None:
    """`npu graph` → `npu`; None for any other key."""
    m = GRAPH_KEY.match(key.strip().lower())
    return m.group(1) if m else None
