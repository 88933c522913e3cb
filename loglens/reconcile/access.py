"""The access log as a table of segments: one row per stretch of generation POSTs between two
server-info call groups (or boundaries), computed in one polars plan (a 1 GiB log holds millions
of access lines and may hold 100 000 segments).  loglens.runs turns rows into Segment objects
only when they are needed.

Columns: seg, file_id, source, endpoint, s / line_no / cluster (lists, one item per POST of the
segment's dominant endpoint), n_posts, warmup (index of the first measured POST: the client
warmup and anything before it come first), w_size (POSTs of the warmup cluster), w_pause,
w_all (clusters that look like a warmup after a ≥ 3 s pause), cand (index of the first POST
after each of them: where a run may start), burst_s (first measured POST),
end_s / end_line / end_path (first server-info call), dep_s / dep_ms (deprecation warning).
"""

from __future__ import annotations

import hashlib
import os

import polars as pl

from loglens.store import Store

GEN_ENDPOINTS = ("/generate", "/v1/completions", "/v1/chat/completions")
INFO_PATHS = ("/get_server_info", "/server_info")
CLIENT_START_PATHS = ("/v1/models",)
MAX_WARMUP_POSTS = 8
WARMUP_PAUSE_S = (1.0, 120.0)
STRONG_PAUSE_S = 3.0  # without server-info calls, a warmup must also follow a pause this long


def _markers(store: Store, file_id: str | None) -> pl.DataFrame:
    """Access lines and events that delimit runs, in log order: kind P (generation POST),
    I (server-info call), B (a boundary: start-up, ready, client start), D (deprecation)."""
    paths = GEN_ENDPOINTS + INFO_PATHS + CLIENT_START_PATHS
    http = store.scan("http").select("file_id", "line_no", "ts", "method", "path")
    if file_id:
        http = http.filter(pl.col("file_id") == file_id)
    # exact paths (a fast hash lookup), plus the rare ones with a query string, stripped
    exact = http.filter(pl.col("path").is_in(paths))
    query = (http.filter(pl.col("path").str.contains("?", literal=True))
             .with_columns(path=pl.col("path").str.replace(r"\?.*$", "")).filter(pl.col("path").is_in(paths)))
    is_post, is_get = pl.col("method") == "POST", pl.col("method") == "GET"
    kind = (pl.when(is_post & pl.col("path").is_in(GEN_ENDPOINTS)).then(pl.lit("P"))
            .when(is_get & pl.col("path").is_in(INFO_PATHS)).then(pl.lit("I"))
            .when(is_get).then(pl.lit("B")))
    http = [f.with_columns(kind=kind).filter(pl.col("kind").is_not_null()).drop("method") for f in (exact, query)]
    ev = (store.scan("events").select("file_id", "line_no", "ts", "kind", "message")
          .filter(pl.col("kind").is_in(["server_args", "ready", "deprecation"])))
    if file_id:
        ev = ev.filter(pl.col("file_id") == file_id)
    ev = ev.filter((pl.col("kind") != "deprecation") | pl.col("message").str.contains("server_info", literal=True))
    ev = ev.select("file_id", "line_no", "ts", pl.lit(None, pl.String).alias("path"),
                   pl.when(pl.col("kind") == "deprecation").then(pl.lit("D")).otherwise(pl.lit("B")).alias("kind"))
    # access lines without a timestamp (uvicorn before SGLang v0.3.4) cannot anchor anything
    both = pl.concat(pl.collect_all([*http, ev])).filter(pl.col("ts").is_not_null())
    if both.height == 0:
        return both.with_columns(s=pl.lit(None, pl.Float64), ms=pl.lit(None, pl.Boolean))
    # log order: one integer key (sorting by a string column first costs several times more)
    files = {f: i for i, f in enumerate(sorted(both["file_id"].unique().to_list()))}
    key = pl.col("file_id").replace_strict(files, return_dtype=pl.Int64) * (1 << 40) + pl.col("line_no")
    return both.sort(key).with_columns(
        s=pl.col("ts").dt.epoch("us").cast(pl.Float64) / 1e6,
        ms=(pl.col("ts").dt.epoch("us") % 1_000_000) != 0,
    )


CACHE_VERSION = 3  # bump whenever the table's content or columns change


def segment_table(store: Store, file_id: str | None = None) -> pl.DataFrame:
    """The segment table, cached in STORE/.cache/ for the store's current content (the files
    table's reads): scanning millions of access lines once per ingest, not once per command."""
    path = cache_path(store, "segments", file_id)
    table = read_cache(path)
    if table is None:
        table = _segment_table(store, file_id)
        write_cache(path, table)
    return table


def cache_path(store: Store, name: str, file_id: str | None = None):
    key = _cache_key(store, file_id)
    return store.path / ".cache" / f"{name}-{key}.parquet" if key else None


def read_cache(path) -> pl.DataFrame | None:
    if path is None or not path.exists():
        return None
    try:
        return pl.read_parquet(path)
    except Exception:  # a damaged cache is only a cache
        return None


def write_cache(path, table: pl.DataFrame) -> None:
    """Atomically, replacing older versions of the same cache; silently not on a read-only store."""
    if path is None or table.height == 0:
        return
    try:
        path.parent.mkdir(exist_ok=True)
        prefix = path.name.rsplit("-", 1)[0]
        for old in path.parent.glob(f"{prefix}-*.parquet"):
            old.unlink(missing_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        table.write_parquet(tmp)
        os.replace(tmp, path)
    except OSError:
        pass


def _cache_key(store: Store, file_id: str | None) -> str | None:
    try:
        files = store.scan("files").select("file_id", "seq", "bytes_read").collect()
    except Exception:
        return None
    if files.height == 0:
        return None
    state = files.sort(["file_id", "seq"]).write_csv() + f"|{file_id}|{CACHE_VERSION}"
    return hashlib.sha1(state.encode()).hexdigest()[:16]


def _segment_table(store: Store, file_id: str | None = None) -> pl.DataFrame:
    m = _markers(store, file_id)
    if m.height == 0:
        return pl.DataFrame()
    kind = pl.col("kind")
    # a new segment starts after an info-call group ends, and at every boundary
    m = m.with_columns(_cut=((kind.shift(1) == "I") & (kind != "I") & (kind != "D")) | (kind == "B")
                       | (pl.col("file_id") != pl.col("file_id").shift(1)).fill_null(True))
    m = m.with_columns(seg=pl.col("_cut").cast(pl.Int64).cum_sum())
    posts = m.filter(kind == "P")
    if posts.height == 0:
        return pl.DataFrame()
    # each segment keeps the POSTs of its commonest endpoint (windows over the int `seg` only:
    # group-bys and joins on millions of rows cost several times more)
    code = pl.col("path").replace_strict({p: i for i, p in enumerate(GEN_ENDPOINTS)}, return_dtype=pl.Int8)
    posts = posts.with_columns(_code=code)
    # (the counts are columns first: inside the `when` chain each window was computed twice)
    posts = posts.with_columns((pl.col("_code") == i).sum().over("seg").alias(f"_n{i}") for i in range(len(GEN_ENDPOINTS)))
    n0, n1, n2 = pl.col("_n0"), pl.col("_n1"), pl.col("_n2")
    best_code = pl.when((n0 >= n1) & (n0 >= n2)).then(0).when(n1 >= n2).then(1).otherwise(2)
    posts = posts.filter(pl.col("_code") == best_code).drop("_n0", "_n1", "_n2").rename({"path": "endpoint"})
    ends = (m.filter(kind == "I").group_by("seg").agg(pl.col("s").first().alias("end_s"),
                                                        pl.col("line_no").first().alias("end_line"),
                                                        pl.col("path").first().alias("end_path")))
    deps = (m.filter(kind == "D").group_by("seg").agg(pl.col("s").first().alias("dep_s"),
                                                        pl.col("ms").first().alias("dep_ms")))
    # warmup clusters: POSTs < 1 s apart (the same second) form a cluster; cluster ids are global
    # and increase along the log, so a cluster is a run of rows: no group-by needed
    new_seg = (pl.col("seg") != pl.col("seg").shift(1)).fill_null(True)
    posts = posts.with_columns(gap=pl.when(new_seg).then(float("inf")).otherwise(pl.col("s").diff()))
    posts = posts.with_columns(cluster=(pl.col("gap") >= 1.0).cast(pl.Int64).cum_sum(),
                               _row=pl.int_range(pl.len()))
    firsts = posts.filter(pl.col("gap") >= 1.0).select("seg", "cluster", "_row", pl.col("gap").alias("before"))
    clusters = firsts.with_columns(
        size=pl.col("_row").shift(-1).fill_null(posts.height) - pl.col("_row"),
        after=pl.when(pl.col("seg").shift(-1) == pl.col("seg")).then(pl.col("before").shift(-1)))
    lo, hi = WARMUP_PAUSE_S
    cand = clusters.filter((pl.col("size") <= MAX_WARMUP_POSTS) & pl.col("after").is_between(lo, hi)
                           & (pl.col("before") >= pl.col("after")))
    # the warmup: the candidate after the longest pause (stray requests earlier are not taken)
    best = (cand.sort(["seg", "before", "cluster"], descending=[False, True, False])
            .group_by("seg", maintain_order=True).first()
            .select("seg", (pl.col("_row") + pl.col("size")).alias("_w_end_row"), pl.col("size").alias("w_size"),
                    pl.col("after").alias("w_pause")))
    strong = cand.filter(pl.col("before") >= STRONG_PAUSE_S)
    # where a run may start after each of them: the first POST of the next cluster in the segment
    # (as a row number here; an index into the segment's POSTs below)
    after = (strong.select("seg", (pl.col("cluster") + 1).alias("cluster"))
             .join(firsts.select("seg", "cluster", "_row"), on=["seg", "cluster"], how="inner"))
    strong = (strong.group_by("seg").agg(pl.col("cluster").sort().alias("w_all"))
              .join(after.group_by("seg").agg(pl.col("_row").sort().alias("_cand")), on="seg", how="left"))
    table = (posts.group_by("seg", maintain_order=True)
             .agg(pl.col("file_id").first(), pl.col("endpoint").first(),
                  pl.col("s"), pl.col("line_no"), pl.col("cluster"), pl.col("_row").first())
             .join(best, on="seg", how="left").join(ends, on="seg", how="left").join(deps, on="seg", how="left")
             .join(strong, on="seg", how="left")
             .with_columns(warmup=(pl.col("_w_end_row") - pl.col("_row")).fill_null(0),
                           cand=(pl.col("_cand") - pl.col("_row")).fill_null([]))
             .drop("_w_end_row", "_row", "_cand"))
    sources = store.scan("files").select("file_id", "source").unique("file_id", keep="last").collect()
    table = table.join(sources, on="file_id", how="left")
    n = pl.col("s").list.len()
    table = table.with_columns(n_posts=n, warmup=pl.when(pl.col("warmup") >= n).then(0).otherwise(pl.col("warmup")))
    return table.with_columns(
        w_pause=pl.when(pl.col("warmup") > 0).then(pl.col("w_pause")),
        w_size=pl.when(pl.col("warmup") > 0).then(pl.col("w_size")).otherwise(0),
        burst_s=pl.col("s").list.get(pl.col("warmup")),
        burst_line=pl.col("line_no").list.get(pl.col("warmup")),
    )
