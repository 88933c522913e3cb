"""The reconcile report: plain data.  The JSON output and the terminal view both render it.

JSON shape (one object per bench record; DESIGN.md's required keys marked *):

    record   {index, source, line_no, tag}
    client   {output_throughput*, duration_s*, completed*, total_output_tokens*, total_input_tokens,
              backend, request_rate ("inf" for the default), max_concurrency, num_prompts,
              max_output_tokens_per_s, concurrency, accept_length}
    window   {start*, end* (ISO-8601, the log's local time, ms), method ("access log" |
              "decode activity" | "--start/--end"), confidence (0..1), evidence[] (sentences),
              source, file_id, endpoint, requests, warmup_requests, first_request_line, end_line,
              end_anchor}
    server   {decode_tokens*, gen_throughput_peak*, gen_throughput_mean*, gen_throughput_steady,
              peak_line {ts, line_no, stream, running_req, source}, decode_lines, dp_streams,
              decode_log_interval, accept_len_mean}
    tokens   {client_output_tokens, first_tokens_from_prefill, reprefill_tokens,
              expected_decode_tokens, server_decode_tokens, unexplained_tokens, unexplained_pct,
              other_requests_in_window, by_phase {ramp_up, steady, prefill, idle, drain, tail}}
    time     {duration_s, ramp_up_s, steady_s, prefill_s, idle_s, drain_s, tail_s (they sum to
              duration_s), first_steady_at, drain_from, prefill_batches, prefill_counted_as_steady}
    gap      {server_tok_s*, server_figure ("peak" | "quote"), client_tok_s*,
              steps* [{name, tok_s, why, kind ("rate" | "time" | "tokens")}], residual_tok_s*,
              residual_why}
    warnings [sentences]

Invariant: gap.server_tok_s + Σ gap.steps[].tok_s + gap.residual_tok_s == gap.client_tok_s.
A record that cannot be reconciled is {record, error}.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Report:
    record: dict
    client: dict
    window: dict
    server: dict
    tokens: dict
    time: dict
    gap: dict
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"record": self.record, "client": self.client, "window": self.window, "server": self.server,
                "tokens": self.tokens, "time": self.time, "gap": self.gap, "warnings": self.warnings}


@dataclass
class Failure:
    record: dict
    error: str

    def to_dict(self) -> dict:
        return {"record": self.record, "error": self.error}


def record_info(rec) -> dict:
    return {"index": rec.index, "source": rec.source, "line_no": rec.line_no, "tag": rec.tag}


def client_block(rec) -> dict:
    return {
        "output_throughput": rec.output_throughput, "duration_s": rec.duration, "completed": rec.completed,
        "total_output_tokens": rec.total_output_tokens, "total_input_tokens": rec.total_input_tokens,
        "backend": rec.backend, "request_rate": _finite(rec.request_rate), "max_concurrency": rec.max_concurrency,
        "num_prompts": rec.num_prompts, "max_output_tokens_per_s": rec.max_output_tokens_per_s,
        "concurrency": rec.concurrency, "accept_length": rec.accept_length,
    }


def _finite(x):
    """JSON has no Infinity: the default `--request-rate inf` becomes the string "inf"."""
    if isinstance(x, float) and x != x:
        return None
    if isinstance(x, float) and x in (float("inf"), float("-inf")):
        return "inf"
    return x
