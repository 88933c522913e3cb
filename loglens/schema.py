"""The store's tables and their columns: one fixed schema per table.

Every Parquet file of a table is written with exactly this schema, so that
`polars.scan_parquet("STORE/<table>/**/*.parquet")`, DuckDB and pyarrow read the
table as one.  Column names follow DESIGN.md's rule (drop `#` and a parenthesised
unit, lower-case, other runs of non-alphanumerics become `_`).  Keys a release prints
that are not listed here are kept in the `extra` column (a JSON object) and reported.
"""

from __future__ import annotations

import polars as pl

DT = pl.Datetime("us")

#: rank columns, in the order SGLang prints them today; null where the prefix has none
RANK_COLUMNS = ["dp_rank", "pp_rank", "attn_cp_rank", "moe_dp_rank", "tp_rank", "ep_rank"]

_ROW_ID = {"source": pl.String, "file_id": pl.String, "line_no": pl.Int64}
_RANKS = {c: pl.Int32 for c in RANK_COLUMNS}
_PREFIX = {"ts": DT, "clock": pl.Time, **_RANKS, "gpu": pl.Int32, "proc": pl.String}

DECODE = {
    **_PREFIX,
    **_ROW_ID,
    "variant": pl.String,  # which SGLang line shape (D0..D13), see parsers/batch_lines.py
    "iter": pl.Int64,  # the ` [n]` forward counter, when printed
    "running_req": pl.Int64,
    "token": pl.Int64,
    "token_usage": pl.Float64,
    "full_token": pl.Int64,
    "full_token_usage": pl.Float64,
    "swa_token": pl.Int64,
    "swa_token_usage": pl.Float64,
    "mamba_num": pl.Int64,
    "mamba_usage": pl.Float64,
    "gpu_token": pl.Int64,
    "gpu_token_usage": pl.Float64,
    "cpu_token": pl.Int64,
    "cpu_token_usage": pl.Float64,
    "accept_len": pl.Float64,
    "accept_rate": pl.Float64,
    "cap_len": pl.Float64,
    "block_accept_len": pl.Float64,
    "pre_allocated_usage": pl.Float64,
    "prealloc_req": pl.Int64,
    "transfer_req": pl.Int64,
    "host_receive_req": pl.Int64,
    "retracted_req": pl.Int64,
    "waiting_image_req": pl.Int64,
    "largest_len": pl.Int64,
    "cuda_graph": pl.Boolean,
    "graph_device": pl.String,  # cuda / cpu / npu / musa: which `<device> graph` label
    "gen_throughput": pl.Float64,
    "queue_req": pl.Int64,
    "est_decode_tflops_s": pl.Float64,
    "est_read_bw": pl.Float64,
    "est_write_bw": pl.Float64,
    "fwd_occupancy": pl.Float64,  # percent, as printed
    "timestamp": DT,  # the v0.4.9.post1 trailing `timestamp:` field
    "extra": pl.String,  # JSON object of keys this parser does not know
}

PREFILL = {
    **_PREFIX,
    **_ROW_ID,
    "variant": pl.String,
    "iter": pl.Int64,
    "mixed": pl.Boolean,  # `Prefill batch(mixed #running-req: R)` form
    "new_seq": pl.Int64,
    "new_token": pl.Int64,
    "cached_token": pl.Int64,
    "cache_hit_rate": pl.Float64,  # percent, cumulative since start (old releases)
    "token": pl.Int64,
    "token_usage": pl.Float64,
    "full_token_usage": pl.Float64,
    "swa_token_usage": pl.Float64,
    "mamba_usage": pl.Float64,
    "gpu_token_usage": pl.Float64,
    "cpu_token_usage": pl.Float64,
    "running_req": pl.Int64,
    "queue_req": pl.Int64,
    "pending_token": pl.Int64,
    "replay_token": pl.Int64,
    "unbootstrapped_req": pl.Int64,
    "transferring_req": pl.Int64,
    "bootstrap_req": pl.Int64,
    "prealloc_req": pl.Int64,
    "inflight_req": pl.Int64,
    "optimistic_req": pl.Int64,
    "waiting_image_req": pl.Int64,
    "cuda_graph": pl.Boolean,
    "graph_device": pl.String,
    "input_throughput": pl.Float64,
    "est_prefill_tflops_s": pl.Float64,
    "fwd_occupancy": pl.Float64,
    "time": pl.Float64,  # PD prefill v0.4.7: seconds since the previous prefill log
    "timestamp": DT,
    "extra": pl.String,
}

HTTP = {
    "ts": DT,
    "clock": pl.Time,
    **_ROW_ID,
    "level": pl.String,
    "client_addr": pl.String,
    "client_port": pl.Int32,
    "method": pl.String,
    "path": pl.String,
    "http_version": pl.String,
    "status": pl.Int32,
    "status_text": pl.String,
}

EVENTS = {
    **_PREFIX,
    **_ROW_ID,
    "line_end": pl.Int64,
    "kind": pl.String,
    "message": pl.String,
    # numbers some kinds carry (null elsewhere)
    "retracted_reqs": pl.Int64,
    "new_tokens_gained": pl.Int64,
    "new_token_ratio_before": pl.Float64,
    "new_token_ratio_after": pl.Float64,
    "max_total_num_tokens": pl.Int64,
    "max_running_requests": pl.Int64,
    "chunked_prefill_size": pl.Int64,
    "max_prefill_tokens": pl.Int64,
    "context_len": pl.Int64,
    "kv_tokens": pl.Int64,
    "elapsed_s": pl.Float64,
    "avail_mem_gb": pl.Float64,
}

REJECTS = {
    **_ROW_ID,
    "ts": DT,
    "family": pl.String,  # which family the line looked like
    "raw": pl.String,
    "reason": pl.String,
}

FILES = {
    "source": pl.String,  # the path as given (absolute)
    "file_id": pl.String,  # identity of this file's content lineage (head hash); rows carry it
    "seq": pl.Int64,  # 1 for the first read, 2 for the next (one row per read)
    "size_bytes": pl.Int64,  # size (uncompressed) when read
    "bytes_read": pl.Int64,  # bytes consumed, = size_bytes after a complete read
    "lines": pl.Int64,  # physical lines read so far (cumulative)
    "blank_lines": pl.Int64,  # of which blank (cumulative)
    "head_len": pl.Int64,  # bytes hashed for head_sha1 (64 KiB, or less for a small file)
    "head_sha1": pl.String,  # same name, other file?
    "tail_sha1": pl.String,  # sha1 of the 4 KiB before bytes_read: grown, or rewritten?
    "resume_at": pl.Int64,  # byte offset a later read restarts from (start of the held-back tail)
    "resume_line": pl.Int64,  # line number at resume_at
    "tail_blank_lines": pl.Int64,  # blank lines among those re-read from resume_at
    "compressed": pl.Boolean,
    "mtime": DT,
    "ingested_at": DT,
    "unknown_keys": pl.String,  # JSON {key: count} of batch-line keys this parser does not know
}

#: typed server configuration, derived from `server_args=ServerArgs(...)` events
CONFIG = {
    "source": pl.String,
    "file_id": pl.String,
    "line_no": pl.Int64,
    "ts": DT,
    "model_path": pl.String,
    "served_model_name": pl.String,
    "tp_size": pl.Int64,
    "dp_size": pl.Int64,
    "pp_size": pl.Int64,
    "ep_size": pl.Int64,
    "enable_dp_attention": pl.Boolean,
    "decode_log_interval": pl.Int64,
    "mem_fraction_static": pl.Float64,
    "max_running_requests": pl.Int64,
    "max_total_tokens": pl.Int64,
    "chunked_prefill_size": pl.Int64,
    "cuda_graph_max_bs": pl.Int64,
    "disable_cuda_graph": pl.Boolean,
    "disaggregation_mode": pl.String,
    "speculative_algorithm": pl.String,
    "speculative_num_draft_tokens": pl.Int64,
    "page_size": pl.Int64,
    "schedule_policy": pl.String,
    "port": pl.Int64,
    "args": pl.String,  # every argument as a JSON object of strings
}

TABLES: dict[str, dict[str, pl.DataType]] = {
    "decode": DECODE,
    "prefill": PREFILL,
    "http": HTTP,
    "events": EVENTS,
    "rejects": REJECTS,
    "files": FILES,
    "config": CONFIG,
}

#: tables whose rows cover physical lines (the losslessness check sums these)
LINE_TABLES = ["decode", "prefill", "http", "events", "rejects"]


def empty(table: str) -> pl.DataFrame:
    return pl.DataFrame(schema=TABLES[table])


def conform(df: pl.DataFrame, table: str) -> pl.DataFrame:
    """Give `df` exactly the table's schema: missing columns null, order fixed, types cast."""
    schema = TABLES[table]
    cols = []
    for name, dtype in schema.items():
        if name in df.columns:
            cols.append(pl.col(name).cast(dtype, strict=False))
        else:
            cols.append(pl.lit(None, dtype=dtype).alias(name))
    return df.select(cols)
