"""The Python API reading a DataFrame of sessions (``fit_clicks`` / ``evaluate_clicks``): on whole columns
(``onlineeval.api._clicks._frame_sessions``: converted by pyarrow, read by
``clickmodels.logs_columns.sessions_from_columns``) against the rows read one by one (the reference), and a PBM fit
of the same log for scale.

The frame: ``--sessions`` sessions of 10 documents out of 30 per query over ``--queries`` queries, clicks as ids
(default), one boolean per document (``--flags``) or one 0/1 integer per document read with ``clicks_as="flags"``
(``--int-flags``, a CSV's column). Both reads run in this process, alternated, ``--repeat`` times
each (best kept), and give the same ClickLog (checked); printed: each read's seconds and the ratio, measured in the
same run.

    python benchmarks/bench_api_click_frame.py [--sessions 200000] [--queries 2000] [--repeat 3] [--flags | --int-flags]

Measured 2026-12-04 (2 cores, idle; defaults, best of 2): ids 0.59 s against 3.37 s row by row (0.17); flags 0.46 s
against 3.51 s (0.13); the PBM fit of the log 8.7 s. 0/1 integer flags (``--int-flags``, read row by row before
2026-12-04's second session) 0.50 s against 3.96 s (0.13).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from _timing import fast_against_reference  # benchmarks/_timing.py (run as scripts from this folder)


def frame(sessions: int, queries: int, flags: bool, seed: int = 0, ints: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    q = rng.integers(0, queries, sessions)
    order = np.argsort(rng.random((sessions, 30)), axis=1)[:, :10]
    clicked = rng.random((sessions, 10)) < 0.1
    docs = [[f"d{a}_{j}" for j in row] for a, row in zip(q.tolist(), order.tolist())]
    return pd.DataFrame({
        "session": [f"s{i}" for i in range(sessions)],
        "query": [f"q{a}" for a in q.tolist()],
        "docs": docs,
        "clicks": [(c.astype(int) if ints else c).tolist() if flags else [d for d, x in zip(ds, c) if x]
                   for ds, c in zip(docs, clicked)],
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=200_000)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--flags", action="store_true", help="clicks as one boolean per shown document")
    kind.add_argument("--int-flags", action="store_true", help="clicks as one 0/1 integer per shown document")
    args = parser.parse_args()
    clicks_as = "flags" if args.int_flags else "auto"

    import onlineeval
    import onlineeval.api._clicks as api_clicks

    sessions = frame(args.sessions, args.queries, args.flags or args.int_flags, ints=args.int_flags)
    best, logs = fast_against_reference(api_clicks, ["_frame_sessions"],
                                        lambda: api_clicks._click_log(sessions, clicks_as=clicks_as), args.repeat,
                                        ("columns", "rows"))
    for field in ("query", "docs", "clicks", "click_order", "session_ids", "query_vocab", "doc_vocab"):
        np.testing.assert_array_equal(getattr(logs["columns"], field), getattr(logs["rows"], field), err_msg=field)
    start = time.perf_counter()
    onlineeval.fit_clicks(logs["columns"], "pbm")
    fit = time.perf_counter() - start
    print(f"{args.sessions:,} sessions x 10 documents, {args.queries:,} queries, clicks as "
          f"{'flags' if args.flags else '0/1 integer flags' if args.int_flags else 'ids'} (best of {args.repeat}):")
    print(f"  on whole columns (pyarrow)     {best['columns']:.3f} s")
    print(f"  row by row (the reference)     {best['rows']:.3f} s")
    print(f"  columns / rows                 {best['columns'] / best['rows']:.3f}")
    print(f"  (a PBM fit of the log          {fit:.1f} s)")


if __name__ == "__main__":
    main()
