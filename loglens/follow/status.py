"""The live status: a pure function of store rows (no terminal, no clock, no files).

Times are the log's own clock: "now" is the newest `ts` in the rows, so a replayed or
remote log reads the same as a live local one, and tests need no wall clock.

Gen throughput follows the formats note (§4.1): each DP rank's scheduler prints its own
stream of Decode lines, each value covering the interval since that stream's previous line;
the server's figure is the sum over streams.  "Now" is the latest line of every stream still
printing (a stream silent for `stale_s` has stopped decoding and adds nothing); the history
is, per time bucket, each stream's mean over its lines in the bucket, summed over streams.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import polars as pl

from loglens.schema import empty

STREAM = ["source", "dp_rank"]  # one scheduler process prints one stream
WINDOW_S = 60  # rates and recent counts cover this much log time
STALE_S = 30
HISTORY_S = 300
BUCKET_S = 10
USAGE_ALERT = 0.95
QUEUE_ALERT_MIN = 5
_EPOCH = datetime(1970, 1, 1)


def _num(x):
    """JSON-safe number: NaN/inf (a logged `nan`) become None."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _frame(frames: dict[str, pl.DataFrame], table: str) -> pl.DataFrame:
    df = frames.get(table)
    return df if df is not None else empty(table)


def _newest(frames: dict[str, pl.DataFrame]) -> datetime | None:
    stamps = [df["ts"].max() for df in frames.values() if df is not None and df.height and "ts" in df.columns]
    stamps = [s for s in stamps if s is not None]
    return max(stamps) if stamps else None


def _ordered(df: pl.DataFrame) -> pl.DataFrame:
    return df.sort(["ts", "line_no"], nulls_last=False)


def _latest_per_stream(df: pl.DataFrame) -> pl.DataFrame:
    return _ordered(df).group_by(STREAM, maintain_order=True).agg(pl.all().last())


def _since(df: pl.DataFrame, start: datetime | None) -> pl.DataFrame:
    if start is None or df.height == 0:
        return df
    return df.filter(pl.col("ts") >= start)


def _streams(decode: pl.DataFrame, prefill: pl.DataFrame, stale_s: float) -> list[dict]:
    if decode.height == 0 and prefill.height == 0:
        return []
    last_dec = _latest_per_stream(decode) if decode.height else None
    both = pl.concat(
        [df.select(*STREAM, "ts", "line_no", "queue_req", "token_usage") for df in (decode, prefill) if df.height],
        how="vertical_relaxed",
    )
    last_any = _latest_per_stream(both)
    newest_dec = decode["ts"].max() if decode.height else None
    out = []
    for row in last_any.sort("dp_rank", nulls_last=False).iter_rows(named=True):
        key = (row["source"], row["dp_rank"])
        dec = None
        if last_dec is not None:
            hit = last_dec.filter((pl.col("source") == key[0]) & pl.col("dp_rank").eq_missing(key[1]))
            dec = hit.row(0, named=True) if hit.height else None
        fresh = dec is not None and (
            dec["ts"] is None or newest_dec is None or dec["ts"] >= newest_dec - timedelta(seconds=stale_s)
        )
        out.append(
            {
                "dp_rank": row["dp_rank"],
                "gen_throughput": _num(dec["gen_throughput"]) if fresh else None,
                "running_req": dec["running_req"] if dec else None,
                "queue_req": row["queue_req"],
                "token_usage": _num(row["token_usage"]),
                "cuda_graph": dec["cuda_graph"] if dec else None,
                "last_decode": dec["ts"] if dec else None,
                "decoding": fresh,
            }
        )
    return out


def _history(decode: pl.DataFrame, newest: datetime | None, history_s: int, bucket_s: int) -> list[float | None]:
    n = history_s // bucket_s
    if newest is None or decode.height == 0:
        return [None] * n
    secs = int((newest - _EPOCH).total_seconds())
    end = _EPOCH + timedelta(seconds=secs - secs % bucket_s)  # polars' truncate is epoch-aligned too
    start = end - timedelta(seconds=bucket_s * (n - 1))
    rows = decode.filter(pl.col("ts") >= start, pl.col("gen_throughput").is_finite())
    if rows.height == 0:
        return [None] * n
    per = (
        rows.with_columns(bucket=pl.col("ts").dt.truncate(f"{bucket_s}s"))
        .group_by(["bucket", *STREAM])
        .agg(pl.col("gen_throughput").mean())
        .group_by("bucket")
        .agg(pl.col("gen_throughput").sum())
    )
    got = dict(zip(per["bucket"].to_list(), per["gen_throughput"].to_list()))
    values = [got.get(start + timedelta(seconds=bucket_s * i)) for i in range(n)]
    return [None if v is None else round(v, 2) for v in values]


def _queue_series(decode: pl.DataFrame, prefill: pl.DataFrame, since: datetime | None, bucket_s: int) -> list[int]:
    """Total queue per bucket (each stream's last value in the bucket), oldest first."""
    parts = [df.select(*STREAM, "ts", "line_no", "queue_req") for df in (decode, prefill) if df.height]
    if not parts or since is None:
        return []
    rows = _since(pl.concat(parts, how="vertical_relaxed"), since).filter(pl.col("queue_req").is_not_null())
    if rows.height == 0:
        return []
    per = (
        _ordered(rows)
        .with_columns(bucket=pl.col("ts").dt.truncate(f"{bucket_s}s"))
        .group_by(["bucket", *STREAM], maintain_order=True)
        .agg(pl.col("queue_req").last())
        .group_by("bucket")
        .agg(pl.col("queue_req").sum())
        .sort("bucket")
    )
    return per["queue_req"].to_list()


def _gist(message: str) -> str:
    """First line, and for a traceback its last (the exception), in at most 200 characters."""
    lines = [ln.strip() for ln in message.strip().split("\n")]
    text = lines[0] if len(lines) == 1 else f"{lines[0]} … {lines[-1]}"
    return text if len(text) <= 200 else text[:199] + "…"


def _alerts(s: dict) -> list[dict]:
    out = []
    q = s["queue_history"]
    if len(q) >= 3 and q[-1] >= QUEUE_ALERT_MIN and q[-1] > q[0] and q[-3] <= q[-2] <= q[-1]:
        out.append({"id": "queue_growing", "severity": "warning", "text": f"queue growing: {q[0]} → {q[-1]} requests in the last minute"})
    if s["token_usage"] is not None and s["token_usage"] >= USAGE_ALERT:
        out.append({"id": "token_usage_high", "severity": "warning", "text": f"KV token usage {s['token_usage']:.2f}: the pool is nearly full"})
    r = s["retractions"]
    if r["events"]:
        out.append({"id": "retractions", "severity": "warning", "text": f"{r['events']} retraction(s) ({r['reqs']} requests) in the last {WINDOW_S} s"})
    off = [st["dp_rank"] for st in s["streams"] if st["decoding"] and st["cuda_graph"] is False]
    if off:
        which = ", ".join("DP" + str(r) if r is not None else "the scheduler" for r in off)
        out.append({"id": "cuda_graph_off", "severity": "warning", "text": f"decode ran without CUDA graph on {which}"})
    e = s["errors"]
    if e["count"]:
        out.append({"id": "errors", "severity": "error", "text": f"{e['count']} error(s) in the last {WINDOW_S} s: {e['last'] or ''}"})
    return out


def compute_status(
    frames: dict[str, pl.DataFrame],
    *,
    window_s: int = WINDOW_S,
    stale_s: int = STALE_S,
    history_s: int = HISTORY_S,
    bucket_s: int = BUCKET_S,
) -> dict:
    """`frames`: recent rows of `decode`, `prefill`, `http`, `events`, `rejects` (store schema)."""
    decode, prefill, http, events, rejects = (
        _frame(frames, t) for t in ("decode", "prefill", "http", "events", "rejects")
    )
    newest = _newest(frames)
    since = newest - timedelta(seconds=window_s) if newest else None
    streams = _streams(decode, prefill, stale_s)
    decoding = [st for st in streams if st["decoding"]]
    gen = [st["gen_throughput"] for st in decoding if st["gen_throughput"] is not None]
    graphs = [st["cuda_graph"] for st in decoding if st["cuda_graph"] is not None]
    usages = [st["token_usage"] for st in streams if st["token_usage"] is not None]
    s: dict = {
        "log_time": newest,
        "gen_throughput": round(sum(gen), 2) if gen else None,
        "gen_throughput_history": {"bucket_s": bucket_s, "values": [_num(v) for v in _history(decode, newest, history_s, bucket_s)]},
        "running_req": sum(st["running_req"] for st in decoding if st["running_req"] is not None) if decoding else None,
        "queue_req": sum(st["queue_req"] for st in streams if st["queue_req"] is not None) if streams else None,
        "token_usage": max(usages) if usages else None,
        "cuda_graph": (all(graphs) if graphs else None),
        "streams": streams,
        "queue_history": _queue_series(decode, prefill, since, bucket_s),
    }
    recent_http = _since(http, since)
    span = window_s
    if newest is not None and recent_http.height and recent_http["ts"].min() is not None:
        first_any = min(df["ts"].min() for df in (decode, prefill, http, events) if df.height and df["ts"].min() is not None)
        span = max(1.0, min(window_s, (newest - first_any).total_seconds()))
    codes = recent_http.group_by("status").len().sort("status") if recent_http.height else None
    s["http"] = {
        "window_s": window_s,
        "requests": recent_http.height,
        "rps": round(recent_http.height / span, 2),
        "status": {str(k): v for k, v in codes.iter_rows()} if codes is not None else {},
    }
    recent_ev = _since(events, since)
    retr = recent_ev.filter(pl.col("kind") == "retraction") if recent_ev.height else recent_ev
    s["retractions"] = {
        "events": retr.height,
        "reqs": int(retr["retracted_reqs"].sum() or 0) if retr.height else 0,
        "last": retr["ts"].max() if retr.height else None,
    }
    errs = recent_ev.filter(pl.col("kind").is_in(["error", "traceback"])) if recent_ev.height else recent_ev
    last = _ordered(errs).row(-1, named=True) if errs.height else None
    s["errors"] = {
        "count": errs.height,
        "last": _gist(last["message"]) if last else None,
        "last_ts": last["ts"] if last else None,
    }
    s["rejects"] = _since(rejects, since).height if rejects.height else 0
    s["alerts"] = _alerts(s)
    return s
