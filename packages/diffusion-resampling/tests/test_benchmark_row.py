"""The results row says what its run measured (issue 61), rebuilt from the stored quick run.

ours / baseline = mean log-likelihood MSE of diffusion and of the best baseline on held-out
tuning (ratio = ours / baseline); every printed interval is the exact 95% t-interval of the 48
paired per-data-set differences (icml26_kernels.evidence), not ± 1 s.e.; every tuned
hyper-parameter has its held-out score at every grid point, and an optimum on a grid edge is
owned by an ``edge_note`` and the words "grid edge" in the claim. Skipped in an installed wheel.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(
    not (BENCH / "reproduce_quick.json").is_file(), reason="benchmarks not shipped"
)
PROVENANCE = ("machine", "measured", "seconds", "cpu_seconds", "load_avg_at_start")


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench():
    """reproduce.py, imported; it turns on jax_enable_x64 and sets XLA_FLAGS at import, which
    must not leak into the other test modules (float32 tests): both are restored afterwards."""
    import jax

    x64, flags = jax.config.read("jax_enable_x64"), os.environ.get("XLA_FLAGS")
    try:
        yield _load(BENCH / "reproduce.py", "_diffres_reproduce")
    finally:
        jax.config.update("jax_enable_x64", x64)
        if flags is None:
            os.environ.pop("XLA_FLAGS", None)
        else:
            os.environ["XLA_FLAGS"] = flags


@pytest.fixture(scope="module")
def stored():
    return json.loads((BENCH / "reproduce_quick.json").read_text())


@pytest.fixture(scope="module")
def row():
    return json.loads((BENCH / "reproduce_row.json").read_text())


@pytest.fixture(scope="module")
def lint():
    return _load(ROOT / "tools" / "evidence_lint.py", "_evidence_lint_diffres")


def test_committed_row_is_the_stored_run_summarised(bench, stored, row):
    rebuilt = json.loads(json.dumps(bench.summarise(stored)))
    strip = lambda r: {k: v for k, v in r.items() if k not in PROVENANCE}
    assert strip(rebuilt) == strip(row)
    for k in ("claim", "ours", "baseline", "ratio"):
        assert stored[k] == row[k]


def test_intervals_are_exact_t_of_the_paired_sets_not_one_se(stored, row):
    ev = _load(ROOT / "shared-kernels/src/icml26_kernels/evidence.py", "_ev_diffres")
    res = stored["results"]
    for c in row["evidence"]["comparisons"]:
        base, label = c["name"].removeprefix("diffusion - ").split(": ")
        metric = {"LL MSE": "ll_mse", "KL": "kl", "Bures": "bures"}[label]
        d = np.subtract(res["diffusion"]["per_set"][metric], res[base]["per_set"][metric])
        m, lo, hi = ev.t_interval(d)
        assert (
            c["n"] == 48 and c["diff"] == pytest.approx(m) and c["ci95"] == pytest.approx([lo, hi])
        )
        se = d.std(ddof=1) / np.sqrt(d.size)
        assert (hi - lo) / 2 > 2 * se  # the old row printed ± 1 s.e.
    head = next(c for c in row["evidence"]["comparisons"] if c["name"] == "diffusion - ot: LL MSE")
    assert (
        f"LL MSE {head['diff']:+.2f} [{head['ci95'][0]:+.2f}, {head['ci95'][1]:+.2f}]"
        in row["claim"]
    )
    assert row["ours"] - row["baseline"] == pytest.approx(head["diff"], abs=1e-3)
    assert row["ratio"] == pytest.approx(row["ours"] / row["baseline"], rel=1e-3)


def test_direction_is_named(row):
    head = next(c for c in row["evidence"]["comparisons"] if c["name"] == "diffusion - ot: LL MSE")
    if head["resolved"] and head["diff"] > 0:
        assert "(ot better, against the paper)" in row["claim"]
    assert "tie" not in row["claim"]


def test_every_grid_point_is_scored_and_edges_are_owned(stored, row):
    tuning = {(t["arm"], t["param"]): t for t in row["evidence"]["tuning"]}
    assert set(tuning) == {
        ("diffusion", "T"), ("diffusion", "steps"), ("soft", "alpha"), ("gumbel", "tau"),
        ("ot", "eps"),
    }  # fmt: skip
    assert len(stored["tuning"]["diffusion"]) == len(tuning["diffusion", "T"]["grid"]) * len(
        tuning["diffusion", "steps"]["grid"]
    )
    for (arm, param), t in tuning.items():
        best = min(stored["tuning"][arm].values())
        assert min(t["scores"]) == best  # the profile passes through the joint optimum
        edge = t["chosen"] in (min(t["grid"]), max(t["grid"]))
        assert bool(t.get("edge_note")) == (edge and not t["hard_bound"])
        if t.get("edge_note"):
            assert f"{arm} {param}={t['chosen']}" in row["claim"] and "grid edge" in row["claim"]
    for arm in ("soft", "gumbel", "ot"):  # the baselines' optima are interior
        assert not any(t.get("edge_note") for (a, _), t in tuning.items() if a == arm)


def test_the_lint_passes_the_row_and_fails_planted_errors(row, lint):
    assert lint.check_row(row, "row") == []
    assert lint.check_source(BENCH / "reproduce.py", "reproduce.py") == []
    bad = copy.deepcopy(row)
    c = next(c for c in bad["evidence"]["comparisons"] if c["name"] == "diffusion - ot: LL MSE")
    se = (c["ci95"][1] - c["ci95"][0]) / 2 / 2.0117  # t_{0.975, 47}
    bad["claim"] += f"; paired MSE difference {c['diff']:.2f} ± {se:.2f} (tie)"  # the old row
    assert any("half-width" in p for p in lint.check_row(bad, "row"))
    bad = copy.deepcopy(row)
    bad["claim"] = bad["claim"].replace("grid edge", "edge")  # an edge the claim hides
    assert any("edge" in p for p in lint.check_row(bad, "row"))
