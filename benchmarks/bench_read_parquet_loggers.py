"""Reading a Parquet log whose ``logger`` column holds structs (scores as a map, as Spark writes a
``map<string, double>``): on whole columns (``onlineeval.io.logged_fast.read_logger_struct_fast``: each query's first
logger decoded once, every other row compared with it value for value) against row by row (the records of its rows,
the reference, which the whole-column reader declines to), and the same log with the loggers as JSON text.

The log: ``--rows`` top-10 impressions of ``--queries`` queries of ``--candidates`` candidates, a Plackett-Luce
logger per query (temperature 1), users and clicks at random. The reads run in this process, alternated, ``--repeat``
times each (best kept), and give the same log (checked); printed: each read's seconds and the ratios against the
rows read one by one, measured in the same run. (The logger's own propensities, the same in every read, are part of
each time: 500 queries' Plackett-Luce item marginals take about 0.35 s.)

    python benchmarks/bench_read_parquet_loggers.py [--rows 100000] [--queries 500] [--candidates 20] [--repeat 3]

Measured 2026-12-04 (2 cores; defaults): struct loggers on whole columns 0.84 s, row by row 4.21 s (0.20); JSON text
on whole columns 1.06 s.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import onlineeval.io.logged_parquet as logged_parquet
from onlineeval.io.logged import read_logged
from simulations import policies

SCHEMA = pa.schema([("query", pa.string()), ("user", pa.string()), ("shown", pa.list_(pa.string())),
                    ("clicks", pa.list_(pa.string())),
                    ("logger", pa.struct([("policy", pa.string()), ("temperature", pa.float64()),
                                          ("scores", pa.map_(pa.string(), pa.float64()))]))])


def write_logs(folder: Path, rows: int, queries: int, candidates: int, seed: int = 0) -> tuple[Path, Path]:
    """The log with struct loggers and with JSON-text loggers."""
    rng = np.random.default_rng(seed)
    scores = [dict(zip([f"d{q}_{j}" for j in range(candidates)], rng.normal(size=candidates).tolist()))
              for q in range(queries)]
    records = []
    for i in range(rows):
        q = int(rng.integers(queries))
        docs = list(scores[q])
        shown = [docs[j] for j in rng.permutation(candidates)[:10]]
        records.append({"query": f"q{q}", "user": f"u{i % 3000}", "shown": shown,
                        "clicks": [d for d in shown if rng.random() < 0.1],
                        "logger": {"policy": "plackett_luce", "temperature": 1.0, "scores": list(scores[q].items())}})
    structs, texts = folder / "structs.parquet", folder / "texts.parquet"
    table = pa.Table.from_pylist(records, schema=SCHEMA)
    pq.write_table(table, structs)
    text = [json.dumps({**r["logger"], "scores": dict(r["logger"]["scores"])}) for r in records]
    pq.write_table(table.set_column(table.schema.get_field_index("logger"), "logger", pa.array(text)), texts)
    return structs, texts


def row_by_row(path: Path):  # noqa: ANN201
    real = logged_parquet.read_logger_struct_fast
    logged_parquet.read_logger_struct_fast = lambda *a: None
    try:
        return read_logged(path, policies=policies)
    finally:
        logged_parquet.read_logger_struct_fast = real


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--candidates", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        structs, texts = write_logs(Path(tmp), args.rows, args.queries, args.candidates)
        reads = {"struct loggers, whole columns": lambda: read_logged(structs, policies=policies),
                 "struct loggers, row by row": lambda: row_by_row(structs),
                 "JSON-text loggers, whole columns": lambda: read_logged(texts, policies=policies)}
        best = dict.fromkeys(reads, float("inf"))
        logs = {}
        for _ in range(args.repeat):
            for name, read in reads.items():
                t0 = time.perf_counter()
                logs[name] = read()
                best[name] = min(best[name], time.perf_counter() - t0)
        first = logs["struct loggers, whole columns"]
        for name, log in logs.items():  # the same impressions, clicks and propensities (not the file's name)
            a = dataclasses.replace(first.data, source="", logger=None)
            b = dataclasses.replace(log.data, source="", logger=None)
            for f in dataclasses.fields(a):
                x, y = getattr(a, f.name), getattr(b, f.name)
                assert (np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y), (name, f.name)
            every = np.arange(len(first.queries))
            assert np.array_equal(first.data.logger.item_position_marginals(every),
                                  log.data.logger.item_position_marginals(every)), name
        base = best["struct loggers, row by row"]
        print(f"{args.rows:,} rows, {args.queries:,} queries x {args.candidates} candidates (best of {args.repeat})")
        for name, t in best.items():
            print(f"  {name:34s} {t:6.2f} s  ({t / base:.2f} of row by row)")


if __name__ == "__main__":
    main()
