"""Click sampling throughput: vectorized models vs a plain per-impression Python loop.

Run: ``python benchmarks/bench_clickmodels.py [--n 2000000] [--k 10]``. Prints impressions
per second for each model (best of 3 after a warm-up) and the ratio against a plain Python
cascade sampler measured in the same run (on a smaller batch, scaled per impression).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

import clickmodels


def plain_cascade(labels: np.ndarray, click: list[float], stop: list[float], rng: np.random.Generator) -> np.ndarray:
    """The baseline: one impression and one rank at a time."""
    out = np.zeros(labels.shape, dtype=bool)
    for i, row in enumerate(labels.tolist()):
        for r, g in enumerate(row):
            if g < 0:
                continue
            if rng.random() < click[g]:
                out[i, r] = True
                if rng.random() < stop[g]:
                    break
    return out


def best_rate(fn: Callable[[], object], n: int, repeat: int = 3) -> float:
    fn()  # warm-up (page faults, caches)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return n / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2_000_000, help="impressions per batch")
    parser.add_argument("--k", type=int, default=10, help="slots per impression")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    labels = rng.choice(5, size=(args.n, args.k), p=[0.5, 0.25, 0.15, 0.07, 0.03]).astype(np.int8)

    nav = clickmodels.build({"name": "cascade", "preset": "navigational"})
    click = list(nav.attractiveness.values)
    stop = list(nav.stop.values)
    n_plain = 20_000
    plain = best_rate(lambda: plain_cascade(labels[:n_plain], click, stop, rng), n_plain, repeat=1)
    print(f"plain Python cascade loop: {plain / 1e6:8.3f} M impressions/s (baseline)")

    specs = [
        {"name": "cascade", "preset": "navigational"},
        {"name": "cascade", "preset": "informational", "stop_mode": "every_rank"},
        {"name": "cm", "click": click},
        {"name": "rbp", "p": 0.8, "click": click},
        {"name": "pbm", "preset": "ai2018"},
    ]
    extra = []
    for name in ("dbn", "sdbn", "dcm", "ccm", "ubm", "random", "rctr", "dctr", "metric"):
        if name in clickmodels.available():
            extra.append(name)
    print(f"{'model':45s} {'M imp/s':>9s} {'x plain':>9s}")
    for spec in specs:
        model = clickmodels.build(spec)
        rate = best_rate(lambda m=model: m.sample(labels, rng), args.n)
        label = ",".join(f"{k}={v}" for k, v in spec.items() if k != "click")
        print(f"{label:45s} {rate / 1e6:9.2f} {rate / plain:9.0f}")
    for name in extra:
        model = clickmodels.model_class(name).example()
        if name == "ubm":  # the example covers 6 ranks: extend its last row to the batch depth
            g = np.zeros((args.k, args.k))
            for r in range(args.k):
                src = model.examination[min(r, model.examination.shape[0] - 1)]
                g[r, : r + 1] = np.resize(src[src > 0], r + 1)
            model = clickmodels.UBM(model.attractiveness, g)
        rate = best_rate(lambda m=model: m.sample(labels, rng), args.n)
        print(f"{name + ' (example parameters)':45s} {rate / 1e6:9.2f} {rate / plain:9.0f}")


if __name__ == "__main__":
    main()
