"""A counterfactual design's simulated log exported for ``onlineeval estimate`` (``designs[i].export_log``,
:mod:`simulations.export_log`), and gzipped logs read by :func:`onlineeval.io.logged.read_logged`."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import onlineeval.io.logged as logged
from onlineeval.errors import InputError


# ----------------------------------------------------------------------------- gzipped logs
def _records(n: int, seed: int = 3) -> list[dict[str, Any]]:
    """``n`` impressions of 3 slots over 20 queries of 8 documents, with all three propensity forms."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        q = int(rng.integers(20))
        shown = [f"d{d}" for d in rng.permutation(8)[:3]]
        item = rng.uniform(0.05, 1.0, 3)
        prefix = item.copy()  # non-increasing, each at most its slot's item propensity
        for j in (1, 2):
            prefix[j] = min(prefix[j - 1] * rng.uniform(0.1, 1.0), item[j])
        out.append({"query": f"q{q}", "user": f"u{int(rng.integers(300))}", "user_type": int(rng.integers(2)),
                    "shown": shown, "clicks": [int(c) for c in rng.random(3) < 0.3],
                    "propensities": {"list": float(prefix[-1]), "prefix": prefix.tolist(), "item": item.tolist()}})
    return out


def _same(a: logged.LoggedLog, b: logged.LoggedLog) -> None:
    """The two reads hold the same impressions (everything but the file name)."""
    for f in dataclasses.fields(a.data):
        u, v = getattr(a.data, f.name), getattr(b.data, f.name)
        if f.name == "source":
            continue
        if isinstance(u, np.ndarray) or isinstance(v, np.ndarray):
            assert u.dtype == v.dtype, f.name
            np.testing.assert_array_equal(u, v, err_msg=f.name)
        else:
            assert u == v, f.name
    for name in ("queries", "docs", "forms", "source", "no_user", "short"):
        assert getattr(a, name) == getattr(b, name), name
    np.testing.assert_array_equal(a.lines, b.lines)
    np.testing.assert_array_equal(a.query_k, b.query_k)


@pytest.mark.parametrize("n", [200, 9000])  # 9000 impressions: over 1 MB, read by the pyarrow reader
def test_read_logged_reads_a_gzipped_log_as_the_plain_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          n: int) -> None:
    text = "".join(json.dumps(r) + "\n" for r in _records(n)).encode()
    plain, packed = tmp_path / "log.jsonl", tmp_path / "log.jsonl.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text))
    assert (len(text) >= logged.FAST_MIN_BYTES) == (n == 9000)
    fast_calls: list[tuple[Any, Any]] = []
    import onlineeval.io.logged_fast as fast

    original = fast._read_fast

    def recorded(*args: Any) -> Any:
        out = original(*args)
        fast_calls.append((args, out))
        return out

    monkeypatch.setattr(fast, "_read_fast", recorded)
    a, b = logged.read_logged(plain), logged.read_logged(packed)
    assert b.data.n == n and b.data.source == str(packed)
    _same(a, b)
    if n == 9000:  # both read by the pyarrow reader (it accepted them), the gzipped one from its bytes
        assert len(fast_calls) == 2 and fast_calls[1][0][2] == text
        assert all(out is not None for _, out in fast_calls)
        monkeypatch.setattr(logged, "FAST_MIN_BYTES", 1 << 40)  # and line by line: the same
        _same(a, logged.read_logged(packed))
    else:
        assert not fast_calls


def test_a_gzipped_log_with_a_bad_line_names_its_line_and_a_damaged_one_the_file(tmp_path: Path) -> None:
    lines = [json.dumps(r) for r in _records(5)]
    lines[3] = lines[3].replace('"shown"', '"shwn"')
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    with pytest.raises(InputError) as info:
        logged.read_logged(bad)
    assert info.value.path == str(bad) and info.value.line == 4
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode())[:-12])
    with pytest.raises(InputError, match="damaged gzip file") as info:
        logged.read_logged(cut)
    assert info.value.path == str(cut)
