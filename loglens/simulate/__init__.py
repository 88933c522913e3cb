"""A model of SGLang serving a bench_serving run: writes a server log, the bench JSONL, and the truth."""
