"""Head Parallel under data parallelism: an HP × DP DeviceMesh, DDP, and the gradient sync.

A model with :class:`~icml26_latentmoe.MultiHeadLatentMoE` layers has two kinds of weights:

* **shared** (W_in, W_out, attention, embeddings, ...): the same on every rank;
* **head-local** (each layer's ``router``, ``w1``, ``w2`` and the ``router_bias`` /
  ``expert_load`` buffers, :attr:`MultiHeadLatentMoE.HEAD_LOCAL`): only the ranks that own the
  same heads hold the same values. The official code marks them ``*_no_share`` and skips them
  in its gradient all-reduce.

The mesh has shape (DP, HP), dims ``("dp", "hp")``: rank = dp·HP + hp. The ``"hp"`` groups
(contiguous ranks, ideally one node) split the heads; the ``"dp"`` groups join the replicas of
the same heads. Every rank computes the mean loss ℓ_r of its own N tokens; the training loss is
ℓ = (1/W) Σ_r ℓ_r over all W = DP·HP ranks. Its gradient:

    shared θ:      ∂ℓ/∂θ = (1/W) Σ_r ∂ℓ_r/∂θ                 all-reduce-mean over the world
    head-local φ:  ∂ℓ/∂φ = (1/W) Σ_{r' ∈ dp(r)} g_{r'}          g_r = Σ_{s ∈ hp(r)} ∂ℓ_s/∂φ

because the HP backward all-to-all already brings every HP peer's ∂ℓ_s into the head-local
gradient g_r on the rank that owns φ. So: head-local gradients are *summed* over the DP group and
divided by W. (The official code, HP only, leaves them unscaled, i.e. W times ∂ℓ/∂φ; Adam is
nearly invariant to that, SGD and gradient clipping are not.)

DDP: :func:`data_parallel` wraps the model in ``DistributedDataParallel`` over the whole mesh
and tells DDP to ignore the head-local parameters and buffers (DDP would otherwise broadcast
rank 0's heads over every rank at construction and average different heads' gradients);
:func:`sync_head_local_grads` then finishes the head-local gradients after ``backward()``.
Without DDP, :func:`all_reduce_grads` does both kinds.

FSDP2: :func:`fully_shard_hp` applies ``torch.distributed.fsdp.fully_shard`` in HSDP form over
the same ranks: shared parameters sharded over the DP group and replicated over the HP group
(gradients reduced over all W ranks, divided by W, as DDP does); head-local parameters are
``ignored_params`` (their heads differ across the HP group, so they must not be sharded or
reduced there) and are finished by :func:`sync_head_local_grads`, as with DDP.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.nn.parallel import DistributedDataParallel

from .latentmoe import MultiHeadLatentMoE

__all__ = [
    "all_reduce_grads",
    "data_parallel",
    "fully_shard_hp",
    "head_local_names",
    "hp_dp_groups",
    "hp_dp_mesh",
    "sync_head_local_grads",
]


def hp_dp_mesh(hp_size: int, device_type: str = "cpu") -> DeviceMesh:
    """A (DP, HP) DeviceMesh over all ranks, DP = world / ``hp_size``; dims ``("dp", "hp")``."""
    world = dist.get_world_size()
    if not isinstance(hp_size, int) or hp_size < 1 or world % hp_size:
        raise ValueError(
            f"hp_size must be a positive divisor of the world size {world}; got {hp_size!r}"
        )
    return init_device_mesh(device_type, (world // hp_size, hp_size), mesh_dim_names=("dp", "hp"))


def hp_dp_groups(mesh: DeviceMesh) -> tuple[dist.ProcessGroup, dist.ProcessGroup]:
    """(HP group, DP group) of this rank: pass them as ``process_group`` and ``replica_group``."""
    _check_mesh(mesh)
    return mesh.get_group("hp"), mesh.get_group("dp")


def head_local_names(model: nn.Module) -> list[str]:
    """Fully qualified names of the head-local parameters and buffers of ``model``."""
    names = []
    for prefix, mod in model.named_modules():
        if isinstance(mod, MultiHeadLatentMoE):
            names += [f"{prefix}.{n}" if prefix else n for n in mod.HEAD_LOCAL]
    return names


def _head_local_params(model: nn.Module) -> list[nn.Parameter]:
    return [
        p
        for mod in model.modules()
        if isinstance(mod, MultiHeadLatentMoE)
        for name, p in mod.named_parameters(recurse=False)
        if name in mod.HEAD_LOCAL
    ]


def _check_mesh(mesh: DeviceMesh) -> None:
    if not isinstance(mesh, DeviceMesh) or mesh.mesh_dim_names != ("dp", "hp"):
        raise ValueError("mesh must be the DeviceMesh of hp_dp_mesh (dims ('dp', 'hp'))")


def data_parallel(model: nn.Module, mesh: DeviceMesh, **ddp_kwargs) -> DistributedDataParallel:
    """``DistributedDataParallel`` over all ranks of ``mesh`` that leaves head-local state alone.

    After each ``loss.backward()`` call :func:`sync_head_local_grads` (on the unwrapped or the
    wrapped model) before the optimizer step. ``ddp_kwargs`` go to DDP.
    """
    _check_mesh(mesh)
    if mesh.size() != dist.get_world_size():
        raise ValueError("data_parallel needs a mesh over the whole world (hp_dp_mesh)")
    DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(
        model, head_local_names(model)
    )
    return DistributedDataParallel(model, process_group=dist.group.WORLD, **ddp_kwargs)


def fully_shard_hp(model: nn.Module, mesh: DeviceMesh, **fsdp_kwargs) -> nn.Module:
    """FSDP2 (HSDP) over ``mesh`` that shards shared weights over DP and leaves head-local ones.

    Call on every rank after building the model (same seed everywhere) and before creating the
    optimizer; after each ``backward()`` call :func:`sync_head_local_grads`. Returns ``model``
    (now an ``FSDPModule``); ``fsdp_kwargs`` go to ``fully_shard``.
    """
    _check_mesh(mesh)
    if mesh.size() != dist.get_world_size():
        raise ValueError("fully_shard_hp needs a mesh over the whole world (hp_dp_mesh)")
    # HSDP mesh (replicate, shard) = (HP position, DP position): the transpose of (dp, hp)
    hsdp = DeviceMesh(
        mesh.device_type, mesh.mesh.T.contiguous(), mesh_dim_names=("hp_replicate", "dp_shard")
    )
    ignored = set(_head_local_params(model))
    # imported here: torch.distributed.fsdp costs ~9 s of `import icml26_latentmoe` on a CPU box
    from torch.distributed.fsdp import fully_shard

    fully_shard(model, mesh=hsdp, ignored_params=ignored, **fsdp_kwargs)
    return model


@torch.no_grad()
def sync_head_local_grads(model: nn.Module, mesh: DeviceMesh) -> None:
    """Head-local gradients: sum over the DP group, divide by the world size W (see above)."""
    _check_mesh(mesh)
    dp, world = mesh.get_group("dp"), mesh.size()
    for p in _head_local_params(model):
        if p.grad is None:
            p.grad = torch.zeros_like(p)  # a replica without this step's tokens still joins
        if mesh["dp"].size() > 1:
            dist.all_reduce(p.grad, group=dp)
        p.grad.div_(world)


@torch.no_grad()
def all_reduce_grads(model: nn.Module, mesh: DeviceMesh) -> None:
    """Without DDP: shared gradients averaged over the world, head-local ones as above."""
    _check_mesh(mesh)
    local = {id(p) for p in _head_local_params(model)}
    for p in model.parameters():
        if id(p) not in local and p.requires_grad:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad.div_(mesh.size())
    sync_head_local_grads(model, mesh)
