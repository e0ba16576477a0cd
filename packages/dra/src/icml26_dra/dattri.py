"""DRA behind dattri's attributor interface (``cache(train_loader)`` / ``attribute(train, test)``).

``DRAAttributor(task)`` takes a ``dattri.task.AttributionTask`` and is used like dattri's
``TracInAttributor``: it asks the task for per-sample gradients
(``task.get_grad_loss_func(in_dims=(None, 0))`` for training data,
``task.get_grad_target_func`` for test/target data, parameters from ``task.get_param``),
optionally projects them, denoises them on the cached training pool, selects dimensions by
leave-target-out discriminability over the test (unsafe target) set, and returns the
(n_train, n_test) matrix of cosines on the kept dimensions, the shape dattri's attributors
return. Duck-typed: dattri is not imported here, so the module works with any object that has
those task methods (tests check it side by side against dattri's TracIn when dattri is
installed).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch

from .denoise import Denoiser, DimSelection, select_dims_leave_target_out
from .representations import RandomProjector

__all__ = ["DRAAttributor"]


class DRAAttributor:
    """DRA in dattri's attributor interface (gradient representations of one checkpoint).

    Args:
        task: a dattri ``AttributionTask`` (or anything with ``get_grad_loss_func``,
            ``get_grad_target_func`` and ``get_param``).
        ckpt_idx: which of the task's checkpoints to differentiate at.
        projector: a ``RandomProjector`` over the flattened parameters, or None.
        center, whiten, shrinkage, k, ks: as in ``DRA`` (k: "auto", "all" or an int).
        device: where batches are moved.
    """

    def __init__(
        self,
        task: Any,
        *,
        ckpt_idx: int = 0,
        projector: RandomProjector | None = None,
        layer_name: str | Sequence[str] | None = None,
        center: bool = True,
        whiten: str = "diag",
        shrinkage: float = 0.1,
        k: int | str = "auto",
        ks: Sequence[int] | None = None,
        device: str = "cpu",
    ) -> None:
        if not (k in ("auto", "all") or (isinstance(k, int) and k >= 1)):
            raise ValueError(f"k must be 'auto', 'all' or a positive int; got {k!r}")
        self.task, self.ckpt_idx, self.projector = task, ckpt_idx, projector
        self.layer_name, self.device = layer_name, device
        self.denoiser = Denoiser(center=center, whiten=whiten, shrinkage=shrinkage)
        self.k, self.ks = k, ks
        self.selection_: DimSelection | None = None
        self._z_train: np.ndarray | None = None

    def _grads(self, loader: Iterable[Any], target: bool) -> np.ndarray:
        kw: dict[str, Any] = {"in_dims": (None, 0)}
        if self.layer_name is not None:
            kw.update(layer_name=self.layer_name, ckpt_idx=self.ckpt_idx)
        fn = self.task.get_grad_target_func(**kw) if target else self.task.get_grad_loss_func(**kw)
        params, _ = self.task.get_param(ckpt_idx=self.ckpt_idx, layer_name=self.layer_name)
        out = []
        for data in loader:
            if isinstance(data, (tuple, list)):
                data = tuple(x.to(self.device) for x in data)
            g = fn(params, data).detach()  # (B, P)
            if not bool(torch.isfinite(g).all()):
                raise FloatingPointError("non-finite per-sample gradient from the task")
            if self.projector is not None:
                g = self.projector(g)
            out.append(g.double().cpu().numpy())
        if not out:
            raise ValueError("the dataloader yielded no batch")
        return np.concatenate(out)  # (n, P or k)

    def cache(self, full_train_dataloader: Iterable[Any]) -> None:
        """Gradients of the whole training pool; fits the denoiser (mu, sigma) on them."""
        g = self._grads(full_train_dataloader, target=False)
        self._z_train = self.denoiser.fit(g).transform(g)

    def attribute(
        self, train_dataloader: Iterable[Any], test_dataloader: Iterable[Any]
    ) -> torch.Tensor:
        """(n_train, n_test) cosines of denoised, dimension-selected gradients.

        ``cache`` is called on ``train_dataloader`` if it was not called before; the denoiser
        and the dimension selection always use the cached pool.
        """
        if self._z_train is None:
            self.cache(train_dataloader)
            z = self._z_train
        else:
            z = self.denoiser.transform(self._grads(train_dataloader, target=False))
        assert z is not None and self._z_train is not None
        zt = self.denoiser.transform(self._grads(test_dataloader, target=True))  # (M, k)
        d = zt.shape[1]
        if self.k == "auto":
            self.selection_ = select_dims_leave_target_out(self._z_train, zt, self.ks)
            dims = self.selection_.dims
        elif self.k == "all":
            dims = np.arange(d)
        else:
            dims = np.argsort(-np.abs(zt.mean(axis=0)), kind="stable")[: int(self.k)]
        a, b = z[:, dims], zt[:, dims]
        a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-300)
        b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-300)
        return torch.from_numpy(a @ b.T)  # (n_train, n_test)
