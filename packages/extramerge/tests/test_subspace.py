"""rank1_report: exact recovery on a line, Gram PCA == numpy SVD, line + noise."""

import numpy as np
import pytest
import torch
from icml26_extramerge import rank1_report, trajectory_gram


def _flat(sd, keys):
    return torch.cat([sd[k].reshape(-1).double() for k in keys])


def test_checkpoints_on_a_line_give_the_line_exactly():
    g = torch.Generator().manual_seed(0)
    c = {
        "a": torch.randn(5, 3, generator=g, dtype=torch.float64),
        "b": torch.randn(7, generator=g, dtype=torch.float64),
    }
    v = {
        "a": torch.randn(5, 3, generator=g, dtype=torch.float64),
        "b": torch.randn(7, generator=g, dtype=torch.float64),
    }
    t = torch.tensor([0.0, 0.3, 1.1, 1.5, 2.9, 3.0, 4.2], dtype=torch.float64)  # uneven, increasing
    traj = [{k: c[k] + ti * v[k] for k in c} for ti in t]
    r = rank1_report(traj)
    vn = _flat(v, ["a", "b"]).norm()
    assert r.explained_variance_ratio == pytest.approx(1.0, abs=1e-12)
    torch.testing.assert_close(_flat(r.direction, ["a", "b"]), _flat(v, ["a", "b"]) / vn)
    torch.testing.assert_close(r.projections, (t - t.mean()) * vn)
    # slope of projections per index (least squares)
    i = torch.arange(len(t), dtype=torch.float64)
    i = i - i.mean()
    assert r.slope == pytest.approx(float((i * (t - t.mean())).sum() / (i * i).sum() * vn))


def test_line_plus_noise_recovers_direction():
    g = torch.Generator().manual_seed(1)
    p = 2000
    v = torch.randn(p, generator=g)
    v = v / v.norm()
    traj = [{"x": 0.5 * i * v + 0.01 * torch.randn(p, generator=g)} for i in range(16)]
    r = rank1_report(traj)
    cos = torch.dot(r.direction["x"], v).item()
    assert cos > 0.99  # sign convention: points along increasing index
    assert r.explained_variance_ratio > 0.9


def test_gram_pca_equals_numpy_svd():
    g = torch.Generator().manual_seed(2)
    traj = [
        {
            "a": torch.randn(4, 6, generator=g),
            "b": torch.randn(9, generator=g),
            "n": torch.tensor(i),
        }
        for i in range(7)
    ]
    x = np.stack([_flat(sd, ["a", "b"]).numpy() for sd in traj])  # (N, P)
    xc = x - x.mean(0)
    u, s, vt = np.linalg.svd(xc, full_matrices=False)
    r = rank1_report(traj)
    assert r.explained_variance_ratio == pytest.approx(s[0] ** 2 / (s**2).sum(), rel=1e-10)
    np.testing.assert_allclose(r.eigenvalues.numpy(), s**2, rtol=1e-9, atol=1e-9)
    d = _flat(r.direction, ["a", "b"]).numpy()
    sign = np.sign(d @ vt[0])
    np.testing.assert_allclose(d, sign * vt[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(r.projections.numpy(), sign * u[:, 0] * s[0], rtol=1e-9, atol=1e-9)
    # uncentred Gram matrix
    np.testing.assert_allclose(trajectory_gram(traj).numpy(), x @ x.T, rtol=1e-12)
    assert "n" not in r.direction


def test_tied_keys_counted_once():
    g = torch.Generator().manual_seed(3)
    traj = []
    for _ in range(5):
        e = torch.randn(3, 4, generator=g)
        traj.append({"wte": e, "lm_head": e, "z": torch.randn(2, generator=g)})
    untied = [{"wte": sd["wte"], "z": sd["z"]} for sd in traj]
    assert rank1_report(traj).explained_variance_ratio == pytest.approx(
        rank1_report(untied).explained_variance_ratio, rel=1e-12
    )


def test_report_unpacks_as_evr_direction_projections():
    g = torch.Generator().manual_seed(4)
    traj = [{"x": torch.randn(6, generator=g, dtype=torch.float64)} for _ in range(5)]
    r = rank1_report(traj)
    evr, u, p = r  # the tuple contract
    assert evr == r.explained_variance_ratio and u is r.direction and p is r.projections
    assert r.eigenvalues.shape == (5,) and isinstance(r.slope, float)  # extra fields kept
