"""Batched contraction vs the dense numpy reference, per-row loops, autograd and slicing."""

import itertools

import numpy as np
import pytest

pytest.importorskip("opt_einsum")

from icml26_kernels.tensornet import (
    GraphTopology,
    contract,
    contract_reference,
    contraction_plan,
    dense_tensor_reference,
    environment,
    init_cores,
    multilinear_vectors,
    probe,
)

TOPOLOGIES = {
    "single": GraphTopology.from_edges(1, [], 2),
    "chain": GraphTopology.chain(7, 3),
    "tree": GraphTopology.from_edges(
        8, [(0, 1), (0, 2), (0, 3), (3, 4), (3, 5), (5, 6), (5, 7)], 2
    ),
    # benzene-like ring with a two-atom tail: a loop
    "ring": GraphTopology.from_edges(
        8, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (2, 6), (6, 7)], 3
    ),
    "disconnected": GraphTopology.from_edges(5, [(0, 1), (2, 3)], 2),
    "mixed_bonds": GraphTopology.from_edges(4, [(0, 1), (1, 2), (2, 3), (3, 0)], [1, 2, 3, 4]),
}


def _rand(topo, seed=0):
    return init_cores(topo, init_scale=1.0, seed=seed)


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_tensornet_contract_matches_dense_reference(name):
    topo = TOPOLOGIES[name]
    cores = _rand(topo)
    rng = np.random.default_rng(1)
    vec = rng.standard_normal((9, topo.n_nodes, 2))  # arbitrary vectors, not only [1-z, z]
    np.testing.assert_allclose(
        contract(topo, cores, vec), contract_reference(topo, cores, vec), atol=1e-12
    )


def test_tensornet_dense_tensor_is_multilinear_extension():
    """ν(z) = Σ_S T[1_S] Π_{u∈S} z_u Π_{u∉S} (1 - z_u), by enumeration of all 2^n subsets."""
    topo = TOPOLOGIES["ring"]
    cores = _rand(topo, seed=3)
    t = dense_tensor_reference(topo, cores)
    z = np.random.default_rng(2).random((4, topo.n_nodes))
    want = np.zeros(4)
    for bits in itertools.product([0, 1], repeat=topo.n_nodes):
        b = np.array(bits)
        want += t[bits] * np.prod(np.where(b == 1, z, 1 - z), axis=1)
    np.testing.assert_allclose(contract(topo, cores, multilinear_vectors(z)), want, atol=1e-12)


def test_tensornet_batched_equals_per_row_loop():
    topo = TOPOLOGIES["tree"]
    cores = _rand(topo)
    z = np.random.default_rng(0).random((33, topo.n_nodes))
    vec = multilinear_vectors(z)
    batched = contract(topo, cores, vec)
    loop = np.array([contract(topo, cores, vec[i : i + 1])[0] for i in range(len(z))])
    np.testing.assert_allclose(batched, loop, atol=1e-13)


def test_tensornet_chunking_and_slicing_are_exact():
    topo = TOPOLOGIES["ring"].with_bond_dim(4)
    cores = _rand(topo)
    vec = multilinear_vectors(np.random.default_rng(0).random((20, topo.n_nodes)))
    full = contract(topo, cores, vec)
    plan = contraction_plan(topo, 7, max_intermediate=64)
    assert plan.sliced and plan.n_slices > 1
    assert plan.largest_intermediate <= 64
    sliced = contract(topo, cores, vec, max_batch=7, max_intermediate=64)
    np.testing.assert_allclose(sliced, full, atol=1e-12)
    with pytest.raises(ValueError, match="max_intermediate"):
        contract(topo, cores, vec, max_intermediate=1)
    with pytest.raises(ValueError, match="max_batch"):
        contract(topo, cores, vec, max_batch=0)


def test_tensornet_torch_matches_numpy_and_gradcheck():
    torch = pytest.importorskip("torch")
    topo = TOPOLOGIES["ring"].with_bond_dim(2)
    cores = _rand(topo)
    z = torch.rand(5, topo.n_nodes, dtype=torch.float64)
    tc = [torch.tensor(c, requires_grad=True) for c in cores]
    out = contract(topo, tc, multilinear_vectors(z))
    assert isinstance(out, torch.Tensor) and out.shape == (5,)
    np.testing.assert_allclose(
        out.detach().numpy(),
        contract_reference(topo, cores, multilinear_vectors(z.numpy())),
        atol=1e-12,
    )

    def f(*cs):
        return contract(topo, list(cs), multilinear_vectors(z), max_intermediate=16)

    assert torch.autograd.gradcheck(f, tuple(tc), eps=1e-6, atol=1e-7)


def test_tensornet_environment_is_design_and_gradient():
    torch = pytest.importorskip("torch")
    topo = TOPOLOGIES["tree"].with_bond_dim(3)
    cores = _rand(topo, seed=5)
    vec = multilinear_vectors(np.random.default_rng(4).random((6, topo.n_nodes)))
    val = contract(topo, cores, vec)
    node = 3  # degree 3: core (2, 3, 3, 3)
    env = environment(topo, cores, vec, node)
    assert env.shape == (6, *topo.core_shape(node))
    np.testing.assert_allclose((env * cores[node][None]).reshape(6, -1).sum(1), val, atol=1e-12)
    tc = [torch.tensor(c, requires_grad=True) for c in cores]
    contract(topo, tc, torch.tensor(vec)).sum().backward()
    np.testing.assert_allclose(tc[node].grad.numpy(), env.sum(0), atol=1e-12)
    with pytest.raises(ValueError, match="node"):
        environment(topo, cores, vec, 99)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_tensornet_probe_gives_exact_partial_derivatives(backend):
    topo = TOPOLOGIES["ring"]
    cores = _rand(topo, seed=7)
    z = np.random.default_rng(8).random((3, topo.n_nodes))
    if backend == "torch":
        torch = pytest.importorskip("torch")
        cores_in = [torch.tensor(c) for c in cores]
    else:
        cores_in = cores
    sites = [[0, 1], [2, 6], [5, 7]]
    got = probe(topo, cores_in, multilinear_vectors(z), sites, [[-1.0, 1.0], [-1.0, 1.0]])
    got = np.asarray(got)
    assert got.shape == (3, 3)

    def nu(zz):
        return contract(topo, cores, multilinear_vectors(zz))

    # multilinear: the mixed partial is the exact second difference
    for p, (u, v) in enumerate(sites):
        want = np.zeros(3)
        for a, b in itertools.product([0, 1], repeat=2):
            zz = z.copy()
            zz[:, u], zz[:, v] = a, b
            want += (-1) ** (a + b) * nu(zz)
        np.testing.assert_allclose(got[p], want, atol=1e-12)


def test_tensornet_bad_shapes_raise():
    topo = TOPOLOGIES["chain"]
    cores = _rand(topo)
    with pytest.raises(ValueError, match="vectors must have shape"):
        contract(topo, cores, np.ones((4, topo.n_nodes + 1, 2)))
    with pytest.raises(ValueError, match=r"cores\[0\] must have shape"):
        contract(topo, [np.ones((2, 5)), *cores[1:]], np.ones((4, topo.n_nodes, 2)))
    with pytest.raises(ValueError, match="one tensor per node"):
        contract(topo, cores[:-1], np.ones((4, topo.n_nodes, 2)))
    with pytest.raises(ValueError, match="sites"):
        probe(topo, cores, np.ones((1, topo.n_nodes, 2)), [[99]], [[-1.0, 1.0]])
