"""Batched contraction of graph-shaped tensor networks, with a dense numpy reference beside it.

For a :class:`~icml26_kernels.tensornet.topology.GraphTopology` with cores ``A^(u)`` (shape
``(d, χ_e...)``) and one physical vector ``b_u ∈ R^d`` per node and per batch row, the network
value is

    ν(b) = Σ_{bonds, p} Π_u A^(u)[p_u, bonds(u)] · b_u[p_u]                         (1)

With ``d = 2`` and ``b_u = [1 - z_u, z_u]`` this is a multilinear function of ``z ∈ [0, 1]^n``
(every ``z_u`` enters through one factor, linearly). Everything below evaluates (1):

- :func:`contract` — the fast path: absorb each node's vector into its core first,
  ``M_u[b, bonds] = Σ_p A^(u)[p, bonds] b_u[b, p]`` (linear in ``n``), then one einsum over the
  batched cores (the batch index is a hyper-index shared by all of them), a contraction path found once by opt_einsum (or any
  opt_einsum-compatible optimizer such as cotengra's) and cached per shape, optional batch
  chunking (``max_batch``) and bond slicing (``max_intermediate``) to bound memory. Works on
  numpy arrays and on torch tensors (autograd flows through it), because opt_einsum dispatches
  on the array type.
- :func:`contract_reference` — the numpy reference: build the dense ``d^n`` tensor by absorbing
  cores one at a time with ``np.tensordot`` and contract it with the vectors; exponential, for
  checking the fast path on small ``n``.
- :func:`probe` — substitute chosen vectors at chosen nodes (``[-1, 1]`` at ``u`` turns (1) into
  ``∂ν/∂z_u``) over a grid of base points, batched.
- :func:`environment` — (1) with core ``u`` left out: ``ν(b) = <A^(u), E_u(b)>``, the design
  matrix of an alternating-least-squares update and the gradient of (1) with respect to ``A^(u)``.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .topology import GraphTopology

try:  # the [tensornet] extra
    import opt_einsum as oe
except ImportError:  # pragma: no cover - exercised only without the extra
    oe = None

__all__ = [
    "ContractionPlan",
    "contract",
    "contract_reference",
    "contraction_plan",
    "dense_tensor_reference",
    "environment",
    "init_cores",
    "multilinear_vectors",
    "probe",
]


def _require_oe() -> Any:
    if oe is None:
        raise ImportError(
            "icml26_kernels.tensornet.contract needs opt_einsum: pip install 'icml26-kernels[tensornet]'"
        )
    return oe


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


# ----------------------------------------------------------------------------- equations
def _symbols(topo: GraphTopology) -> tuple[str, list[str], list[str]]:
    """(batch symbol, physical symbol per node, bond symbol per edge)."""
    o = _require_oe()
    n, e = topo.n_nodes, len(topo.edges)
    batch = o.get_symbol(0)
    phys = [o.get_symbol(1 + u) for u in range(n)]
    bonds = [o.get_symbol(1 + n + k) for k in range(e)]
    return batch, phys, bonds


@functools.lru_cache(maxsize=256)
def _equation(topo: GraphTopology, leave_out: int | None = None) -> str:
    """einsum string over the *batched cores* ``M_u[b, bonds(u)] = Σ_p A^(u)[p, bonds] b_u[b, p]``.

    Output ``(B,)``; with ``leave_out=u`` core ``u`` is omitted and the output keeps its bonds
    ``(B, χ...)`` (the environment of ``u`` before its physical vector is attached).
    """
    batch, _, bonds = _symbols(topo)
    terms = [batch + "".join(bonds[k] for k in topo.incident[u]) for u in range(topo.n_nodes)]
    out = batch + (terms[leave_out][1:] if leave_out is not None else "")
    return ",".join(t for u, t in enumerate(terms) if u != leave_out) + "->" + out


@dataclass(frozen=True)
class ContractionPlan:
    """A cached contraction: which bonds are sliced, and the path for one slice.

    Attributes:
        equation: the einsum string.
        shapes: operand shapes of one slice (sliced bonds have size 1 there).
        sliced: symbols of the sliced bond indices.
        n_slices: number of slices summed (product of the sliced bond dimensions).
        path: opt_einsum pairwise path.
        flops: opt_einsum's cost estimate for one slice.
        largest_intermediate: elements of the largest intermediate of one slice.
    """

    equation: str
    shapes: tuple[tuple[int, ...], ...]
    sliced: tuple[str, ...]
    n_slices: int
    path: tuple[tuple[int, ...], ...]
    flops: int
    largest_intermediate: int


def _path_info(eq: str, shapes: tuple[tuple[int, ...], ...], optimize: Any) -> Any:
    o = _require_oe()
    views = [np.broadcast_to(np.zeros((), dtype=np.float64), s) for s in shapes]  # no memory
    _, info = o.contract_path(eq, *views, optimize=optimize)
    return info


@functools.lru_cache(maxsize=512)
def _plan_cached(
    eq: str, shapes: tuple[tuple[int, ...], ...], optimize: Any, max_intermediate: int | None
) -> ContractionPlan:
    inputs = eq.split("->")[0].split(",")
    output = eq.split("->")[1]
    sizes: dict[str, int] = {}
    for term, shape in zip(inputs, shapes):
        for s, d in zip(term, shape):
            sizes[s] = d
    sliced: list[str] = []
    cur = tuple(shapes)
    info = _path_info(eq, cur, optimize)
    # greedy slicing: fix the summed index whose removal shrinks the largest intermediate most
    while max_intermediate is not None and int(info.largest_intermediate) > max_intermediate:
        best = None
        for s, d in sizes.items():
            if s in output or s in sliced or d == 1:
                continue
            trial = _slice_shapes(inputs, cur, (s,))
            t_info = _path_info(eq, trial, optimize)
            key = (int(t_info.largest_intermediate), float(t_info.opt_cost) * d)
            if best is None or key < best[0]:
                best = (key, s, trial, t_info)
        if best is None:
            raise ValueError(
                f"max_intermediate={max_intermediate} cannot be met by slicing bonds: the largest "
                f"intermediate is still {int(info.largest_intermediate)} elements (lower max_batch)"
            )
        _, s, cur, info = best
        sliced.append(s)
    n_slices = math.prod(sizes[s] for s in sliced)
    return ContractionPlan(
        equation=eq,
        shapes=cur,
        sliced=tuple(sliced),
        n_slices=n_slices,
        path=tuple(tuple(int(i) for i in p) for p in info.path),
        flops=int(info.opt_cost),
        largest_intermediate=int(info.largest_intermediate),
    )


def _slice_shapes(
    inputs: list[str], shapes: tuple[tuple[int, ...], ...], sliced: Sequence[str]
) -> tuple[tuple[int, ...], ...]:
    return tuple(
        tuple(1 if s in sliced else d for s, d in zip(term, shape))
        for term, shape in zip(inputs, shapes)
    )


def contraction_plan(
    topo: GraphTopology,
    batch: int,
    *,
    leave_out: int | None = None,
    optimize: Any = "auto",
    max_intermediate: int | None = None,
) -> ContractionPlan:
    """The (cached) plan :func:`contract` uses for ``batch`` rows: path, cost, slicing."""
    eq = _equation(topo, leave_out)
    shapes = tuple((batch, *s[1:]) for u, s in enumerate(topo.core_shapes) if u != leave_out)
    return _plan_cached(eq, shapes, optimize, max_intermediate)


# ----------------------------------------------------------------------------- inputs
def init_cores(
    topo: GraphTopology, *, init_scale: float = 0.1, seed: int | None = None
) -> list[np.ndarray]:
    """Near-constant random cores: ``A[p, 0, ..., 0] = 1`` for every ``p`` plus small noise.

    The anchor makes the all-zero bond configuration contribute ``Π_u Σ_p b_u[p] = 1`` (a
    constant network for ``b = [1 - z, z]``), so training starts from a well-scaled function;
    the noise is ``N(0, 1) · init_scale / sqrt(fan)`` with ``fan`` the core size, which breaks
    the symmetry between bond states.
    """
    if init_scale < 0:
        raise ValueError(f"init_scale must be >= 0; got {init_scale}")
    rng = np.random.default_rng(seed)
    cores = []
    for shape in topo.core_shapes:
        c = rng.standard_normal(shape) * init_scale / math.sqrt(math.prod(shape))
        c[(slice(None),) + (0,) * (len(shape) - 1)] += 1.0
        cores.append(c)
    return cores


def multilinear_vectors(z: Any) -> Any:
    """``z (B, n) -> b (B, n, 2)`` with ``b[..., 0] = 1 - z`` and ``b[..., 1] = z``."""
    if _is_torch(z):
        import torch

        return torch.stack([1 - z, z], dim=-1)
    z = np.asarray(z, dtype=np.float64)
    return np.stack([1 - z, z], axis=-1)


def _check(topo: GraphTopology, cores: Sequence[Any], vectors: Any) -> None:
    if len(cores) != topo.n_nodes:
        raise ValueError(f"cores must hold one tensor per node ({topo.n_nodes}); got {len(cores)}")
    for u, (c, s) in enumerate(zip(cores, topo.core_shapes)):
        if tuple(c.shape) != s:
            raise ValueError(
                f"cores[{u}] must have shape {s} (phys, bonds...); got {tuple(c.shape)}"
            )
    shape = tuple(vectors.shape)
    if len(shape) != 3 or shape[1:] != (topo.n_nodes, topo.phys_dim):
        raise ValueError(
            f"vectors must have shape (B, n_nodes={topo.n_nodes}, phys_dim={topo.phys_dim}); got {shape}"
        )


# ----------------------------------------------------------------------------- fast path
def _run(
    topo: GraphTopology,
    cores: Sequence[Any],
    vectors: Any,
    leave_out: int | None,
    optimize: Any,
    max_intermediate: int | None,
) -> Any:
    o = _require_oe()
    b = int(vectors.shape[0])
    # absorb the physical vectors first: M_u (B, χ...) -- linear in n, no 2^n intermediate
    ops = [_tensordot(vectors[:, u, :], c) for u, c in enumerate(cores) if u != leave_out]
    if not ops:  # a single node left out: its environment is 1
        env = _ones_like(vectors, b)
    else:
        plan = contraction_plan(
            topo, b, leave_out=leave_out, optimize=optimize, max_intermediate=max_intermediate
        )
        env = _contract_sliced(o, plan, ops)  # (B,) or (B, χ...) with leave_out
    if leave_out is None:
        return env
    vec = vectors[:, leave_out, :]  # (B, d)
    return vec.reshape(*vec.shape, *([1] * (env.ndim - 1))) * env.reshape(
        env.shape[0], 1, *env.shape[1:]
    )  # (B, d, χ...)


def _tensordot(vec: Any, core: Any) -> Any:
    """``(B, d), (d, χ...) -> (B, χ...)``."""
    if _is_torch(core):
        import torch

        return torch.tensordot(vec.to(core.dtype), core, dims=([1], [0]))
    return np.tensordot(vec, core, axes=([1], [0]))


def _ones_like(vectors: Any, b: int) -> Any:
    if _is_torch(vectors):
        import torch

        return torch.ones(b, dtype=vectors.dtype, device=vectors.device)
    return np.ones(b)


@functools.lru_cache(maxsize=512)
def _expression(
    eq: str, shapes: tuple[tuple[int, ...], ...], path: tuple[tuple[int, ...], ...]
) -> Any:
    """A reusable opt_einsum ``ContractExpression`` (no per-call equation parsing / path check)."""
    return _require_oe().contract_expression(eq, *shapes, optimize=[tuple(p) for p in path])


def _contract_sliced(o: Any, plan: ContractionPlan, ops: list[Any]) -> Any:
    expr = _expression(plan.equation, plan.shapes, plan.path)
    if not plan.sliced:
        return expr(*ops)
    inputs = plan.equation.split("->")[0].split(",")
    dims = {}
    for term, op in zip(inputs, ops):
        for s, d in zip(term, op.shape):
            dims[s] = int(d)
    total = None
    for values in itertools.product(*(range(dims[s]) for s in plan.sliced)):
        fixed = dict(zip(plan.sliced, values))
        sl_ops = []
        for term, op in zip(inputs, ops):
            if any(s in fixed for s in term):
                idx = tuple(
                    slice(fixed[s], fixed[s] + 1) if s in fixed else slice(None) for s in term
                )
                op = op[idx]
            sl_ops.append(op)
        part = expr(*sl_ops)
        total = part if total is None else total + part
    return total


def contract(
    topo: GraphTopology,
    cores: Sequence[Any],
    vectors: Any,
    *,
    max_batch: int | None = None,
    max_intermediate: int | None = None,
    optimize: Any = "auto",
) -> Any:
    """Evaluate (1) for every batch row at once.

    Args:
        topo: the network's wiring.
        cores: ``n`` arrays, ``cores[u]`` of shape ``topo.core_shape(u) = (d, χ...)``; numpy
            arrays or torch tensors (then the result is a tensor and autograd works).
        vectors: ``(B, n, d)`` physical vectors (use :func:`multilinear_vectors` for ``z``).
        max_batch: contract at most this many rows at a time (bounds memory linearly in B).
        max_intermediate: slice bonds until no intermediate of a slice exceeds this many
            elements; slices are summed (exact, more passes).
        optimize: opt_einsum path optimizer (``"auto"``, ``"greedy"``, ``"optimal"``, or a
            ``PathOptimizer`` such as a cotengra ``HyperOptimizer``). Paths are cached per shape.

    Returns:
        ``(B,)`` values, same array type as ``cores``.
    """
    _check(topo, cores, vectors)
    return _batched(topo, cores, vectors, None, max_batch, max_intermediate, optimize)


def environment(
    topo: GraphTopology,
    cores: Sequence[Any],
    vectors: Any,
    node: int,
    *,
    max_batch: int | None = None,
    max_intermediate: int | None = None,
    optimize: Any = "auto",
) -> Any:
    """``E (B, d, χ...)`` with ``ν(b_i) = Σ A^(node) ⊙ E[i]``: (1) with core ``node`` left out.

    ``cores[node]`` is ignored (it may be anything of the right shape).
    """
    _check(topo, cores, vectors)
    if not 0 <= node < topo.n_nodes:
        raise ValueError(f"node must be in [0, {topo.n_nodes}); got {node}")
    return _batched(topo, cores, vectors, node, max_batch, max_intermediate, optimize)


def _batched(
    topo: GraphTopology,
    cores: Sequence[Any],
    vectors: Any,
    leave_out: int | None,
    max_batch: int | None,
    max_intermediate: int | None,
    optimize: Any,
) -> Any:
    b = int(vectors.shape[0])
    if max_batch is not None and max_batch < 1:
        raise ValueError(f"max_batch must be >= 1 or None; got {max_batch}")
    if max_batch is None or b <= max_batch:
        return _run(topo, cores, vectors, leave_out, optimize, max_intermediate)
    parts = [
        _run(topo, cores, vectors[i : i + max_batch], leave_out, optimize, max_intermediate)
        for i in range(0, b, max_batch)
    ]
    if _is_torch(parts[0]):
        import torch

        return torch.cat(parts, dim=0)
    return np.concatenate(parts, axis=0)


def probe(
    topo: GraphTopology,
    cores: Sequence[Any],
    base: Any,
    sites: Any,
    site_vectors: Any,
    *,
    max_batch: int | None = 8192,
    max_intermediate: int | None = None,
    optimize: Any = "auto",
) -> Any:
    """(1) at ``M`` base points with ``P`` different substitutions of vectors at chosen nodes.

    Args:
        base: ``(M, n, d)`` vectors at every node for each base point (e.g. ``[1 - t, t]`` at
            every node for quadrature node ``t``).
        sites: ``(P, k)`` integer node ids; probe ``p`` replaces nodes ``sites[p]``.
        site_vectors: ``(k, d)`` (the same vectors for every probe) or ``(P, k, d)``.

    Returns:
        ``(P, M)``: entry ``[p, m]`` is (1) with ``base[m]`` except ``b_{sites[p, j]} =
        site_vectors[p, j]``. With ``[-1, 1]`` at the sites of a multilinear network this is the
        mixed partial derivative ``∂^k ν / ∂z_{sites[p]}`` at the base point.
    """
    sites_np = np.asarray(sites.detach().cpu() if _is_torch(sites) else sites, dtype=np.int64)
    if sites_np.ndim != 2:
        raise ValueError(f"sites must have shape (P, k); got {sites_np.shape}")
    if sites_np.size and (sites_np.min() < 0 or sites_np.max() >= topo.n_nodes):
        raise ValueError(f"sites must be node ids in [0, {topo.n_nodes})")
    p, k = sites_np.shape
    vec: Any
    sv: Any
    if _is_torch(cores[0]):
        import torch

        ref = cores[0]
        base_t = torch.as_tensor(base, dtype=ref.dtype, device=ref.device)
        sv = torch.as_tensor(site_vectors, dtype=ref.dtype, device=ref.device)
        m = base_t.shape[0]
        vec = base_t.unsqueeze(0).repeat(p, 1, 1, 1)  # (P, M, n, d)
        sv = sv.expand(p, k, topo.phys_dim) if sv.ndim == 2 else sv
        rows_t = torch.arange(p, device=ref.device)
        for j in range(k):
            cols = torch.as_tensor(sites_np[:, j], device=ref.device)
            vec[rows_t, :, cols, :] = sv[:, j, None, :].expand(p, m, topo.phys_dim)
    else:
        base_np = np.asarray(base, dtype=np.float64)
        sv = np.asarray(site_vectors, dtype=np.float64)
        m = base_np.shape[0]
        vec = np.repeat(base_np[None], p, axis=0)  # (P, M, n, d)
        sv = np.broadcast_to(sv, (p, k, topo.phys_dim)) if sv.ndim == 2 else sv
        rows = np.arange(p)
        for j in range(k):
            vec[rows, :, sites_np[:, j], :] = sv[:, j, None, :]
    if tuple(vec.shape[2:]) != (topo.n_nodes, topo.phys_dim):
        raise ValueError(
            f"base must have shape (M, n_nodes={topo.n_nodes}, phys_dim={topo.phys_dim}); "
            f"got {tuple(vec.shape[1:])}"
        )
    flat = vec.reshape(p * m, topo.n_nodes, topo.phys_dim)
    out = contract(
        topo,
        cores,
        flat,
        max_batch=max_batch,
        max_intermediate=max_intermediate,
        optimize=optimize,
    )
    return out.reshape(p, m)


# ----------------------------------------------------------------------------- reference
def dense_tensor_reference(topo: GraphTopology, cores: Sequence[Any]) -> np.ndarray:
    """The full ``(d,)*n`` tensor ``T[p_0..p_{n-1}]`` of the network (numpy; small ``n`` only).

    Cores are absorbed in node order; a bond is summed (``np.tensordot``) as soon as both of its
    end cores are in. Independent of opt_einsum, so it checks :func:`contract`.
    """
    cores_np = [
        np.asarray(c.detach().cpu() if _is_torch(c) else c, dtype=np.float64) for c in cores
    ]
    # running tensor and the label of each of its axes: ("p", u) physical, ("b", e) open bond
    t = np.ones(())
    labels: list[tuple[str, int]] = []
    for u in range(topo.n_nodes):
        c = cores_np[u]
        c_labels = [("p", u)] + [("b", e) for e in topo.incident[u]]
        shared = [lab for lab in c_labels if lab in labels]
        t = np.tensordot(
            t, c, axes=([labels.index(s) for s in shared], [c_labels.index(s) for s in shared])
        )
        labels = [lab for lab in labels if lab not in shared] + [
            lab for lab in c_labels if lab not in shared
        ]
    order = [labels.index(("p", u)) for u in range(topo.n_nodes)]
    return np.transpose(t, order)


def contract_reference(topo: GraphTopology, cores: Sequence[Any], vectors: Any) -> np.ndarray:
    """(1) by the dense tensor: ``ν(b_i) = Σ_p T[p] Π_u b_{i,u}[p_u]`` (numpy, small ``n``)."""
    _check(topo, cores, vectors)
    t = dense_tensor_reference(topo, cores)
    v = np.asarray(vectors.detach().cpu() if _is_torch(vectors) else vectors, dtype=np.float64)
    out = np.empty(v.shape[0])
    for i in range(v.shape[0]):
        r = t
        for u in range(topo.n_nodes):  # contract the leading physical axis each time
            r = np.tensordot(v[i, u], r, axes=([0], [0]))
        out[i] = float(r)
    return out
