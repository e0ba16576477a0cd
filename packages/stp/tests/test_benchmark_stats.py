"""The benchmark's paired statistics against hand-computed values (t_{0.975, 9} = 2.262)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "reproduce.py"


@pytest.fixture(scope="module")
def bench():
    if not SCRIPT.is_file():
        pytest.skip("benchmarks/ not present (installed package)")
    threads = torch.get_num_threads()
    spec = importlib.util.spec_from_file_location("stp_reproduce", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.set_num_threads(threads)  # the script pins one thread at import
    return mod


def test_paired_difference_interval_and_mde(bench) -> None:
    xs = [0.0] * 10
    ys = [float(k) for k in range(1, 11)]  # differences 1..10: mean 5.5, SD sqrt(55/6)
    r = bench.paired(xs, ys)
    sd = math.sqrt(55 / 6)
    assert r["diff"] == pytest.approx(5.5)
    assert r["sd"] == pytest.approx(sd)
    assert r["ci"] == pytest.approx(2.262 * sd / math.sqrt(10))
    assert r["mde"] == pytest.approx(2.8 * sd / math.sqrt(10))
    flipped = bench.paired(ys, xs)  # the sign follows ys - xs
    assert flipped["diff"] == pytest.approx(-5.5)


def test_t_quantiles(bench) -> None:
    assert [bench.t975(df) for df in (1, 2, 9, 19, 29)] == [12.706, 4.303, 2.262, 2.093, 2.045]
    assert bench.t975(200) == pytest.approx(1.972, abs=2e-3)
