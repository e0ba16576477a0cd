"""The rank-1 subspace of a checkpoint trajectory: PCA through the N x N Gram matrix.

Extra-Merge (Zhou et al., arXiv 2605.26484) observes that consecutive merged checkpoints
M_1..M_N lie close to a line (one principal component explains > 94% of the variance), while
raw checkpoints do not. For a trajectory X (N, P) with P up to billions, PCA is done in the
N-dimensional sample space:

    Xc = X - 1 mean^T                       (N, P)  centred trajectory
    G  = Xc Xc^T = J (X X^T) J,  J = I - 11^T/N      (N, N), accumulated key by key in float64
    G  = V diag(lambda) V^T,  lambda_1 >= lambda_2 >= ...
    EVR_1 = lambda_1 / sum_i lambda_i
    u_1 = Xc^T v_1 / sqrt(lambda_1)        (P,)  unit direction (as a state dict)
    p   = Xc u_1 = sqrt(lambda_1) v_1      (N,)  projections (coordinates along u_1)

so memory is O(N^2 + N * largest tensor) beyond the checkpoints themselves. The sign of u_1 is
fixed so that the projections increase with the checkpoint index (u_1 points "downstream").
Only floating tensors enter; integer buffers are ignored.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .merge import Checkpoint, _check_against, _is_float, load_checkpoint

__all__ = ["Rank1Report", "rank1_report", "trajectory_gram"]


@dataclass(frozen=True)
class Rank1Report:
    """PCA summary of a trajectory; unpacks as `evr, direction, projections = report`.

    explained_variance_ratio: lambda_1 / sum(lambda)  (1.0 for checkpoints exactly on a line)
    direction: u_1 as a state dict (float32 unless the checkpoints are float64), unit norm
    projections: (N,) float64, coordinates of the centred checkpoints along u_1
    eigenvalues: (N,) float64, descending, eigenvalues of the centred Gram matrix
    slope: least-squares slope of projections vs checkpoint index (>= 0 by the sign convention)
    """

    explained_variance_ratio: float
    direction: dict[str, torch.Tensor]
    projections: torch.Tensor
    eigenvalues: torch.Tensor
    slope: float

    def __iter__(self) -> Iterator[Any]:
        """(explained_variance_ratio, direction, projections), the tuple contract; the other
        fields (eigenvalues, slope) stay attributes."""
        return iter((self.explained_variance_ratio, self.direction, self.projections))


def _load_all(trajectory: Sequence[Checkpoint], what: str) -> list[dict[str, torch.Tensor]]:
    if isinstance(trajectory, (str, bytes)) or not isinstance(trajectory, Sequence):
        raise TypeError(f"{what}: expected a sequence of state dicts or paths")
    sds = [load_checkpoint(c, name=f"{what}[{i}]") for i, c in enumerate(trajectory)]
    if len(sds) < 2:
        raise ValueError(f"{what}: need at least two checkpoints, got {len(sds)}")
    for i, sd in enumerate(sds):
        _check_against(sds[0], sd, f"{what}[{i}]")
    if not any(_is_float(v) for v in sds[0].values()):
        raise ValueError(f"{what}: no floating-point tensors (only integer / bool buffers)")
    return sds


def _float_keys(sd: dict[str, torch.Tensor]) -> list[str]:
    # tied keys share storage: count each storage once so the geometry is that of the parameters
    seen = set()
    keys = []
    for k, v in sd.items():
        if not _is_float(v):
            continue
        sig = (v.untyped_storage().data_ptr(), v.storage_offset(), tuple(v.shape), v.stride())
        if v.numel() > 0 and sig in seen:
            continue
        seen.add(sig)
        keys.append(k)
    return keys


def trajectory_gram(trajectory: Sequence[Checkpoint]) -> torch.Tensor:
    """Uncentred Gram matrix X X^T (N, N) in float64, accumulated one key at a time."""
    sds = _load_all(trajectory, "trajectory")
    return _gram(sds, _float_keys(sds[0]), center=False)


def _gram(sds: list[dict[str, torch.Tensor]], keys: list[str], center: bool) -> torch.Tensor:
    n = len(sds)
    g = torch.zeros(n, n, dtype=torch.float64)
    for k in keys:
        x = torch.stack([sd[k].detach().reshape(-1).to(torch.float64) for sd in sds])  # (N, n_k)
        if center:  # per key: equals J (X X^T) J, and is better conditioned
            x = x - x.mean(0, keepdim=True)
        g += x @ x.T
    return g


def rank1_report(trajectory: Sequence[Checkpoint]) -> Rank1Report:
    """PC1 of a trajectory (raw or merged checkpoints) through the centred N x N Gram matrix."""
    sds = _load_all(trajectory, "trajectory")
    keys = _float_keys(sds[0])
    if not keys:
        raise ValueError("trajectory: no floating-point tensors to analyse")
    n = len(sds)
    g = _gram(sds, keys, center=True)  # (N, N) centred
    lam, vec = torch.linalg.eigh(g)  # ascending
    lam, vec = lam.flip(0).clamp_min(0.0), vec.flip(1)
    total = float(lam.sum())
    if not total > 0.0:
        raise ValueError("trajectory: all checkpoints are identical (zero variance)")
    v1 = vec[:, 0]  # (N,)
    proj = v1 * lam[0].sqrt()  # (N,)
    t = torch.arange(n, dtype=torch.float64)
    t = t - t.mean()
    slope = float((t * proj).sum() / (t * t).sum())
    if slope < 0:
        v1, proj, slope = -v1, -proj, -slope
    coef = v1 / lam[0].sqrt()  # u_1 = sum_i coef_i (theta_i - mean)
    direction: dict[str, torch.Tensor] = {}
    for k in keys:
        x = torch.stack([sd[k].detach().reshape(-1).to(torch.float64) for sd in sds])  # (N, n_k)
        u = coef @ (x - x.mean(0, keepdim=True))  # (n_k,)
        ref = sds[0][k]
        dt = torch.float64 if ref.dtype == torch.float64 else torch.float32
        direction[k] = u.to(dt).reshape(ref.shape)
    return Rank1Report(
        explained_variance_ratio=float(lam[0]) / total,
        direction=direction,
        projections=proj,
        eigenvalues=lam,
        slope=slope,
    )
