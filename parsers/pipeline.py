"""One parser for batch ingest and live mode: line batches in, typed table rows out.

`LineParser.feed(lines)` takes a frame of complete physical lines (`line_no`, `line`) and
returns rows for every table.  Every line lands in exactly one place: a decode, prefill, http
or events row, a reject, or the blank-line count.  A traceback's continuation lines (no
`[…]` prefix) are folded into the event that started it (`line_no`…`line_end`); since such a
record may continue in the next batch, the last event record of a batch is held back until
more lines (or `final=True`) arrive — which is what makes the result independent of how the
input is cut into batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from .access import LOOKS_LIKE as ACCESS_LIKE
from .access import parse_access
from .batch_lines import parse_batch_lines
from .events import event_rows
from .prefix import first_byte, split_prefix, strip_ansi
from .server_args import parse_server_args

# a continuation line of a Python traceback (it has no `[...]` prefix of its own); torch
# prefixes each line of a rank's traceback with `[rank0]:` (ASCII digits: the reader never cuts a
# chunk before such a line, loglens.reader._cut)
_CONTINUATION = (
    r"^(?:\s|Traceback \(most recent call last\)|During handling of the above|The above exception|\[rank[0-9]+\]:"
    r"|[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b|[\w.]+: )"
)
_LINES_SCHEMA = {"line_no": pl.Int64, "byte_off": pl.Int64, "line": pl.String, "_first": pl.UInt8}
#: first bytes of a line that may hold only whitespace (`\s`: ASCII, or the lead byte of U+0085,
#: U+00A0, U+1680, U+2000–U+205F, U+3000)
_SPACE_LEADS = [9, 10, 11, 12, 13, 32, 0xC2, 0xE1, 0xE2, 0xE3]


def _where(df: pl.DataFrame, candidates: pl.Expr, pattern: str) -> pl.Series:
    """`line` matches `pattern`, tested only on the candidate lines (few: a cheap test names
    them), False elsewhere."""
    idx = df.select(candidates.arg_true()).to_series()
    out = pl.repeat(False, df.height, eager=True)
    if idx.len():
        hit = df.select(pl.col("line").gather(idx).str.contains(pattern)).to_series()
        out = out.scatter(idx.filter(hit), True)
    return out


@dataclass
class Parsed:
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    blank_lines: int = 0
    lines: int = 0  # physical lines consumed (rows + blanks; held-back lines not included)
    unknown_keys: dict[str, int] = field(default_factory=dict)


#: a Decode line's message starts with these 12 characters (12: polars keeps them inline)
_DECODE_HEAD = "Decode batch"
#: how a Prefill line's message starts, in every release; and their first 12 characters
_PREFILL_STARTS = ("Prefill batch", "Prefil batch", "new fill batch")
_PREFILL_HEADS = sorted({s[:12] for s in _PREFILL_STARTS})
#: a Prefill or an access line (one anchored regex for both; the first 12 characters tell which)
_PREFILL_OR_ACCESS = "^(?:" + "|".join(_PREFILL_STARTS) + "|" + ACCESS_LIKE.removeprefix("^") + ")"
#: where a line goes (an enum: comparing and filtering on it is far cheaper than on strings)
FAMILY = pl.Enum(["blank", "decode", "prefill", "http", "event"])


def _family(df: pl.DataFrame) -> pl.DataFrame:
    """Which family each line belongs to: Decode lines by the message's first 12 characters,
    Prefill and access lines by one anchored regex (cheap when it fails at the first character)
    and those 12 characters; the precise grammar is checked by each family's parser, and a line
    that fails it becomes a reject."""
    msg, line, first = pl.col("msg"), pl.col("line"), pl.col("_first")
    # blank lines and unprefixed `#running-req:` lines start with whitespace or `#`
    blank = _where(df, (line.str.len_bytes() == 0) | first.is_in(_SPACE_LEADS), r"^\s*$")
    running = _where(df, ~pl.col("_pfx") & (first == ord("#")), r"^#running-req:")
    # a message that starts like a Prefill line starts with one of its heads, and an access
    # line's with a level name: so one regex pass finds both, and the head tells which (both
    # are columns first: an expression used twice would be computed twice)
    df = df.with_columns(_head=msg.str.slice(0, 12), _either=msg.str.contains(_PREFILL_OR_ACCESS))
    head, either = pl.col("_head"), pl.col("_either")
    fam = (
        pl.when(blank)
        .then(pl.lit("blank", FAMILY))
        .when((head == _DECODE_HEAD) | running)
        .then(pl.lit("decode", FAMILY))
        .when(either & pl.any_horizontal(head == h for h in _PREFILL_HEADS))  # (is_in hashes every row)
        .then(pl.lit("prefill", FAMILY))
        .when(either)
        .then(pl.lit("http", FAMILY))
        .otherwise(pl.lit("event", FAMILY))
    )
    # (two lines glued into one are found by the Decode, Prefill and access parsers: `glued`)
    return df.with_columns(family=fam).drop("_head", "_either")


def _continuations(df: pl.DataFrame) -> pl.Series:
    """Event lines without a prefix that continue the record above (the regex runs on those
    lines only: a few in a hundred)."""
    return _where(df, ~pl.col("_pfx") & (pl.col("family") == "event"), _CONTINUATION).alias("_cont")


class LineParser:
    """Stateful only in the held-back tail record; everything else is a pure function of lines."""

    def __init__(self, check: bool = True) -> None:
        if check:
            from .registry import ensure_verified

            ensure_verified()
        self.pending = pl.DataFrame(schema=_LINES_SCHEMA)

    def feed(self, lines: pl.DataFrame, final: bool = False, ansi: bool = True) -> Parsed:
        """Parse `lines`; `ansi=False` tells that they hold no ESC byte (the reader knows this
        from one memchr over the chunk), which skips the colour-code check."""
        if "byte_off" not in lines.columns:
            lines = lines.with_columns(byte_off=pl.lit(None, pl.Int64))
        if "_first" not in lines.columns:
            lines = lines.with_columns(_first=first_byte(pl.col("line")))
        df = pl.concat([self.pending, lines.select(list(_LINES_SCHEMA)).cast(_LINES_SCHEMA)], how="vertical")
        self.pending = pl.DataFrame(schema=_LINES_SCHEMA)
        out = Parsed()
        if df.height == 0:
            return out
        if ansi:  # held-back lines were stripped when they came
            df = strip_ansi(df)
        df = split_prefix(df)
        df = _family(df)
        # record structure over all lines, so blanks and other families end a traceback
        # a record is a line plus the continuation lines after it; any other line starts one
        df = df.with_columns(_cont=_continuations(df)).with_columns(
            _rec=(~pl.col("_cont")).cum_sum(),
            # is this line's record headed by an event? (continuations of a batch line are orphans)
            _head_ev=pl.when(~pl.col("_cont")).then(pl.col("family").is_in(["event", "blank"])).forward_fill().fill_null(False),
        )
        if not final:
            df = self._hold_back(df)
        if df.height == 0:
            return out
        fam = pl.col("family")
        out.blank_lines = df.select((fam == "blank").sum()).item()
        out.lines = df.height
        rejects = []
        # the batch and access parsers take the line, message and prefix columns only (fewer
        # columns to filter: the record-structure ones are for events)
        lean = df.select(c for c in df.columns if c not in ("byte_off", "_first", "_pfx", "_cont", "_rec", "_head_ev"))
        for table in ("decode", "prefill"):
            part = lean.filter(fam == table)
            if part.height:
                good, bad, unknown = parse_batch_lines(part, table)
                out.tables[table] = good
                rejects.append(bad)
                for k, v in unknown.items():
                    out.unknown_keys[k] = out.unknown_keys.get(k, 0) + v
        part = lean.filter(fam == "http")
        if part.height:
            good, bad = parse_access(part)
            out.tables["http"] = good
            rejects.append(bad)
        out.tables["events"] = event_rows(df.filter((fam == "event") | (fam == "blank")))
        rej = [r for r in rejects if r.height]
        if rej:
            bad = pl.concat(rej, how="vertical_relaxed")
            first = df.item(0, "line_no")
            if df.item(-1, "line_no") - first == df.height - 1:  # consecutive lines: ts by position
                out.tables["rejects"] = bad.with_columns(ts=df.get_column("ts").gather(bad.get_column("line_no") - first))
            else:
                out.tables["rejects"] = bad.join(df.select("line_no", "ts"), on="line_no", how="left")
        cfg = self._config(out.tables["events"])
        if cfg is not None:
            out.tables["config"] = cfg
        return out

    @property
    def pending_start(self) -> tuple[int, int] | None:
        """(line_no, byte offset) of the first held-back line, if any."""
        if self.pending.height == 0:
            return None
        return self.pending.item(0, "line_no"), self.pending.item(0, "byte_off")

    def _hold_back(self, df: pl.DataFrame) -> pl.DataFrame:
        """Keep the trailing record for the next feed if it is an event (it may continue)."""
        rec = df.get_column("_rec")
        last = rec[-1]
        first_idx = df.height - int((rec == last).sum())
        if df.item(first_idx, "family") not in ("event", "blank"):
            first_idx += 1  # a batch/access line cannot grow, but orphan lines after it can
        if first_idx < df.height:
            self.pending = df.slice(first_idx).select(list(_LINES_SCHEMA))
            return df.slice(0, first_idx)
        return df

    @staticmethod
    def _config(events: pl.DataFrame) -> pl.DataFrame | None:
        if events.height == 0:
            return None
        sa = events.filter(pl.col("kind") == "server_args")
        if sa.height == 0:
            return None
        rows = []
        for line_no, ts, message in sa.select("line_no", "ts", "message").iter_rows():
            row = parse_server_args(message)
            if row:
                rows.append({"line_no": line_no, "ts": ts, **row})
        return pl.DataFrame(rows, infer_schema_length=None) if rows else None
