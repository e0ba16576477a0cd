"""Issue 64: the paper's recipe (benchmarks/paper.py, the LGSSM parameter estimation) end to end,
offline and tiny.

No hub model and no dataset: the data are simulated and the diffusion is training-free. ``--smoke``
fits 3 data sets (K = 16, N = 8) with L-BFGS-B through the diffusion (T = 2, 4 steps) and the
multinomial filters and through the Kalman filter, and writes the JSON. The tests recompute its
facts from what it stores: the errors from θ̂, the exact log-likelihood gap from the Kalman
filter at θ̂, the Kalman MLE's stationarity, the success rule, the filter NLL at θ̂ and θ₀ (a
fresh, independent filter run), the ESS from the stored normalised weights, the paired evidence
(direction diffusion - baseline), and lint the JSON. Skipped in an installed wheel.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
LINT = Path(__file__).resolve().parents[3] / "tools" / "evidence_lint.py"
pytestmark = pytest.mark.skipif(not (BENCH / "paper.py").is_file(), reason="benchmarks not shipped")
KEYS = {"recipe", "paper", "config", "smoke", "hardware", "results", "evidence"}
EPS64 = 2.0**-52


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module", autouse=True)
def _x64():
    """The recipe runs in float64 (as the official code): on for this module, then restored."""
    import jax

    x64 = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", x64)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory, _x64):
    paper = _load(BENCH / "paper.py", "diffres_paper")
    out = tmp_path_factory.mktemp("paper") / "paper_diffusion-resampling.json"
    assert paper.main(["--smoke", "--out", str(out), "--quiet"]) == 0
    return paper, json.loads(out.read_text())


@pytest.mark.timeout(120)
def test_smoke_keys_arms_and_lint(smoke):
    _, doc = smoke
    assert set(doc) >= KEYS and doc["recipe"] == "diffusion-resampling" and doc["smoke"] is True
    cfg, res = doc["config"], doc["results"]
    assert (cfg["runs"], cfg["n_steps"], cfg["n_particles"]) == (3, 16, 8)
    assert [a["label"] for a in res["arms"]] == ["diffusion T=2 steps=4", "multinomial"]
    assert res["compare"] == "diffusion T=2 steps=4"
    if LINT.is_file():
        lint = _load(LINT, "evidence_lint")
        assert lint.check_detailed(doc, "paper.json") == []
        assert lint.check_source(BENCH / "paper.py", "paper.py") == []


def test_errors_success_and_evidence_recomputed_from_the_stored_estimates(smoke):
    paper, doc = smoke
    cfg, res = doc["config"], doc["results"]
    star, kal = [0.5, 1.0], res["kalman"]
    assert doc["paper"]["theta_true"] == star
    by = {a["label"]: a for a in res["arms"]}
    for a in res["arms"]:
        assert len(a["theta_hat"]) == cfg["runs"]
        for r, th in enumerate(a["theta_hat"]):
            err = math.dist(th, star)
            assert a["param_err"][r] == pytest.approx(err, rel=1e3 * EPS64)
            assert a["mle_dist"][r] == pytest.approx(math.dist(th, kal["theta_mle"][r]), abs=1e-12)
            # the official success: L-BFGS success and ||θ̂ - θ*|| < 1.9
            assert a["success"][r] == (a["lbfgs_success"][r] and err < 1.9)
            assert a["success"][r] == paper.is_success(a["lbfgs_success"][r], err, 1.9)
            # L-BFGS only accepts descent steps: the fitted NLL is at most the start's
            assert a["nll_hat"][r] <= a["nll0"][r] + 1e3 * EPS64 * abs(a["nll0"][r])
        assert a["n_success"] == sum(a["success"])
    comps = {c["name"]: c for c in doc["evidence"]["comparisons"]}
    ref = by[res["compare"]]
    assert len(comps) == 3 * (len(res["arms"]) - 1)
    for key in ("param_err", "mle_dist", "exact_nll_gap"):
        c = comps[f"{res['compare']} - multinomial: {key}"]
        want = [x - y for x, y in zip(ref[key], by["multinomial"][key])]
        assert c["per_unit"] == pytest.approx(want, abs=1e-12)
        assert c["higher_is_better"] is False and c["n"] == cfg["runs"]


def test_kalman_gap_and_mle_recomputed(smoke):
    import jax
    import jax.numpy as jnp
    import numpy as np

    paper, doc = smoke
    args = paper.build_parser().parse_args(["--smoke"])
    args.runs, args.n_steps = doc["config"]["runs"], doc["config"]["n_steps"]
    ys, _ = paper.data_sets(args)
    kal = doc["results"]["kalman"]
    vg = jax.jit(jax.value_and_grad(paper.kf_nll))
    for r in range(args.runs):
        v, g = vg(jnp.asarray(kal["theta_mle"][r]), ys[r])
        assert float(v) == pytest.approx(kal["nll_mle"][r], rel=1e-12)
        # the Kalman MLE is a stationary point of the exact likelihood
        assert float(jnp.max(jnp.abs(g))) < 1e-3 * max(1.0, float(v))
        assert kal["param_err"][r] == pytest.approx(math.dist(kal["theta_mle"][r], [0.5, 1]))
        for a in doc["results"]["arms"]:
            exact = float(vg(jnp.asarray(a["theta_hat"][r]), ys[r])[0])
            gap = exact - kal["nll_mle"][r]
            assert a["exact_nll_gap"][r] == pytest.approx(gap, rel=1e-9, abs=1e-9)
            # the MLE is the exact minimum: no estimate beats it (up to L-BFGS's tolerance)
            assert gap >= -1e-6 * abs(kal["nll_mle"][r])
    assert np.isfinite(np.asarray(ys)).all()


def test_filter_nll_and_ess_recomputed(smoke):
    import jax
    import jax.numpy as jnp
    import numpy as np
    from icml26_diffusion_resampling import LinearGaussianSSM, particle_filter

    paper, doc = smoke
    args = paper.build_parser().parse_args(["--smoke"])
    args.runs, args.n_steps, args.n_particles = 3, 16, 8
    ref = doc["results"]["arms"][0]
    assert ref["kind"] == "diffusion" and ref["hp"] == "2:4"
    ys, keys = paper.data_sets(args)
    res = paper.resampler_of(ref, args)  # a = -1, T = 2, 4 steps
    assert res.keywords == {"a": -1.0, "T": 2.0, "n_steps": 4}

    @jax.jit
    def nll(theta):
        out = particle_filter(
            keys[0], LinearGaussianSSM(), paper.lgssm(theta), ys[0], n_particles=8, resampler=res
        )
        return -out.log_likelihood

    for theta, want in ((ref["theta_hat"][0], ref["nll_hat"][0]), (args.theta0, ref["nll0"][0])):
        assert float(nll(jnp.asarray(theta, jnp.float64))) == pytest.approx(want, rel=1e-9)
    for a in doc["results"]["arms"]:
        f = a["run0_filter"]
        assert f["theta"] == a["theta_hat"][0]
        lw = np.asarray(f["log_weights"])  # (S, N) normalised log W_k
        assert lw.shape == (4, 8)
        w = np.exp(lw)
        np.testing.assert_allclose(w.sum(1), 1.0, rtol=1e3 * EPS64)
        # the stored ESS of W_k is 1 / Σ W_k², within [1, N]
        np.testing.assert_allclose(f["ess"], 1.0 / (w**2).sum(1), rtol=1e4 * EPS64)
        assert all(1.0 - 1e-9 <= e <= 8.0 + 1e-9 for e in f["ess"])


def test_paper_constants_and_defaults():
    paper = _load(BENCH / "paper.py", "diffres_paper")
    P = paper.PAPER
    assert (P["theta_true"], P["theta0"]) == ([0.5, 1.0], [1.5, 2.0])
    assert (P["transition_var"], P["obs_var"], P["x0_var"]) == (1.0, 0.5, 1.0)
    assert (P["n_particles"], P["n_steps"], P["runs"], P["success_threshold"]) == (
        32,
        128,
        100,
        1.9,
    )
    assert P["diffusion"] == [f"{T}:{s}" for T in (1, 2, 3) for s in (4, 8, 16, 32)]
    assert (P["soft"], P["gumbel"], P["ot"], P["a"]) == (
        [0.5, 0.7, 0.9],
        [0.1, 0.3, 0.5],
        [0.4, 0.8, 1.6],
        -1.0,
    )
    a = paper.build_parser().parse_args([])
    assert (a.runs, a.n_particles, a.n_steps, a.theta0, a.success_threshold) == (
        100,
        32,
        128,
        [1.5, 2.0],
        1.9,
    )
    assert (a.diffusion, a.soft, a.gumbel, a.ot, a.a, a.compare) == (
        P["diffusion"],
        P["soft"],
        P["gumbel"],
        P["ot"],
        -1.0,
        "2:8",
    )
    labels = [x["label"] for x in paper.arms_of(a)]
    assert len(labels) == 12 + 3 + 3 + 3 + 1 and paper.compare_label(a) in labels
    with pytest.raises(ValueError, match="--compare"):
        paper.main(["--diffusion", "1:4", "--compare", "2:8", "--quiet"])
    with pytest.raises(ValueError, match="T:n_steps"):
        paper.parse_diffusion("2-8")


def test_success_rule_is_the_official_one():
    paper = _load(BENCH / "paper.py", "diffres_paper")
    assert paper.is_success(True, 1.89, 1.9) and paper.is_success(True, 0.0, 1.9)
    # a sign-flipped θ₂ (same likelihood: y = θ₂ x is symmetric in x -> -x) is 2 from θ*: no
    assert not paper.is_success(True, math.dist([0.5, -1.0], [0.5, 1.0]), 1.9)
    assert not paper.is_success(True, 1.9, 1.9) and not paper.is_success(False, 0.1, 1.9)


def test_help_imports_no_jax():
    code = (
        "import runpy,sys; sys.argv=['paper.py','--help']\n"
        f"try: runpy.run_path({str(BENCH / 'paper.py')!r}, run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print('HEAVY', [m for m in ('jax','numpy','icml26_diffusion_resampling') if m in sys.modules])"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in r.stdout, r.stdout + r.stderr
