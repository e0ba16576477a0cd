"""The HP lattice model as a backend with a known optimum (exact tests and the benchmark).

A chain of n residues on the 2-D square lattice (a self-avoiding walk). Every residue type is
hydrophobic (H) or polar (P); the energy counts H-H topological contacts,

    E(s, x) = - Σ_{i < j-1} [s_i = H][s_j = H][|x_i - x_j|_1 = 1]        (Lau & Dill, 1989)

so ``rotamer_change`` is sequence design on a fixed conformation and ``backbone_change`` is a
Metropolis walk over lattice moves (``small``: corner flips and end moves, ``shear``:
crankshaft moves, ``backrub``: pivots). The design task fixes the number of H residues (an
exact ``aa_composition`` target); ``hp_optimum`` finds the ground state by enumerating every
self-avoiding walk (up to the 8 lattice symmetries) and every placement of the H residues.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .actions import CANONICAL, BackboneChange, RotamerChange, resolve_selector
from .env import Task
from .metrics import Design

# Kyte-Doolittle hydropathy > 0, plus Trp (Lau & Dill's H class for the canonical residues)
HYDROPHOBIC = frozenset({"ALA", "CYS", "ILE", "LEU", "MET", "PHE", "VAL", "TRP"})
_DIRS = np.array([[1, 0], [0, 1], [-1, 0], [0, -1]])


def contact_matrix(xy: np.ndarray) -> np.ndarray:
    """(n, n) bool: topological contacts (lattice neighbours, not chain neighbours)."""
    d = np.abs(xy[:, None, :] - xy[None, :, :]).sum(-1)
    n = len(xy)
    far = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]) > 1
    return (d == 1) & far


def hp_energy(h: np.ndarray, xy: np.ndarray) -> int:
    """E = -#(H-H contacts) for H-mask h (n,) on conformation xy (n, 2)."""
    c = contact_matrix(xy)
    return -int((c & h[:, None] & h[None, :]).sum() // 2)


def is_self_avoiding(xy: np.ndarray) -> bool:
    steps = np.abs(np.diff(xy, axis=0)).sum(-1)
    return bool((steps == 1).all()) and len({tuple(p) for p in xy.tolist()}) == len(xy)


@lru_cache(maxsize=8)
def self_avoiding_walks(n: int) -> np.ndarray:
    """Every n-site self-avoiding walk up to symmetry: (W, n, 2) int.

    First step is +x and the first turn goes +y, which removes the 8 lattice symmetries.
    """
    if not 2 <= n <= 14:
        raise ValueError(f"n must be in [2, 14] for exhaustive enumeration, got {n}")
    out: list[list[tuple[int, int]]] = []
    path = [(0, 0), (1, 0)]
    seen = set(path)

    def grow(turned: bool) -> None:
        if len(path) == n:
            out.append(list(path))
            return
        x, y = path[-1]
        for dx, dy in ((1, 0), (0, 1), (-1, 0), (0, -1)):
            if not turned and dy == -1:
                continue  # the first turn must be +y
            nxt = (x + dx, y + dy)
            if nxt in seen:
                continue
            path.append(nxt)
            seen.add(nxt)
            grow(turned or dy != 0)
            seen.discard(path.pop())

    grow(False)
    return np.array(out, dtype=np.int64)


def hp_optimum(n: int, n_h: int) -> tuple[int, np.ndarray, np.ndarray]:
    """Exhaustive ground state over conformations and H placements with exactly ``n_h`` H.

    Returns (E*, h mask (n,), conformation (n, 2)). Brute force: every walk x every subset.
    """
    if not 0 <= n_h <= n:
        raise ValueError(f"n_h must be in [0, {n}], got {n_h}")
    walks = self_avoiding_walks(n)  # (W, n, 2)
    subsets = np.array(list(itertools.combinations(range(n), n_h)), dtype=np.int64)  # (C, n_h)
    s = np.zeros((len(subsets), n))  # (C, n) indicator
    if n_h:
        np.put_along_axis(s, subsets, 1.0, axis=1)
    best, arg = 1, (0, 0)
    for lo in range(0, len(walks), 512):
        w = walks[lo : lo + 512]
        d = np.abs(w[:, :, None, :] - w[:, None, :, :]).sum(-1)  # (B, n, n)
        far = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]) > 1
        c = ((d == 1) & far).astype(float)
        e = -np.einsum("cn,bnm,cm->bc", s, c, s) / 2  # (B, C)
        b, k = np.unravel_index(np.argmin(e), e.shape)
        if e[b, k] < best:
            best, arg = int(np.rint(e[b, k])), (lo + int(b), int(k))
    return best, s[arg[1]].astype(bool), walks[arg[0]]


def hp_design_optimum(xy: np.ndarray, n_h: int) -> int:
    """Best energy of ``n_h`` H residues on a fixed conformation (every subset)."""
    c = contact_matrix(np.asarray(xy)).astype(float)
    n = len(xy)
    return min(
        (-int(c[np.ix_(sub, sub)].sum() // 2) for sub in itertools.combinations(range(n), n_h)),
        default=0,
    )


# ---------------------------------------------------------------------------------------------


def _layers(xy: np.ndarray) -> list[str]:
    """core / boundary / surface from the number of occupied non-bonded lattice neighbours."""
    c = contact_matrix(xy).sum(1)
    return ["core" if k >= 2 else "boundary" if k == 1 else "surface" for k in c]


def lattice_design(sequence: Sequence[str], xy: np.ndarray) -> Design:
    xy = np.asarray(xy, dtype=np.int64)
    ca = np.concatenate([xy, np.zeros((len(xy), 1))], axis=1).astype(float)
    return Design(tuple(sequence), ca, {}, payload=xy)


def straight_chain(sequence: Sequence[str]) -> Design:
    """The fully extended conformation (0,0), (1,0), ..., (n-1,0)."""
    n = len(sequence)
    return lattice_design(sequence, np.stack([np.arange(n), np.zeros(n, np.int64)], 1))


@dataclass
class HPBackend:
    """The HP lattice model behind the ``Backend`` protocol.

    ``hydrophobic``: the residue types counted as H (canonical H class plus any non-canonical
    types the task classifies, see ``ncaa.classify_hydrophobic``).
    """

    hydrophobic: frozenset[str] = HYDROPHOBIC
    sweeps: int = 6  # annealing sweeps per FastDesign repeat
    name: str = "hp"

    def layers(self, design: Design) -> list[str]:
        return _layers(np.asarray(design.payload))

    def hotspots(self, design: Design) -> str:
        """The per-residue feedback of the summary: exposed H and buried P residues."""
        c = contact_matrix(np.asarray(design.payload)).sum(1)
        h = [s in self.hydrophobic for s in design.sequence]
        exposed = [i + 1 for i in range(len(h)) if h[i] and c[i] == 0]
        buried = [i + 1 for i in range(len(h)) if not h[i] and c[i] >= 2]
        return f"hot spots of the best design: exposed H at {exposed or 'none'}; buried P at {buried or 'none'}"

    def score(self, design: Design) -> dict[str, float]:
        h = np.array([s in self.hydrophobic for s in design.sequence])
        return {"total_score": float(hp_energy(h, np.asarray(design.payload)))}

    def run(
        self,
        action: RotamerChange | BackboneChange,
        protocol: str,
        parents: Sequence[Design],
        nstruct: int,
        seed: int,
        palette: Sequence[str] = tuple(CANONICAL),
    ) -> list[Design]:
        """``nstruct`` designs, spread over the parents round-robin (the protocol is not read:
        the lattice model interprets the action itself)."""
        rng = np.random.default_rng(seed)
        out = []
        for i in range(nstruct):
            parent = parents[i % len(parents)]
            if isinstance(action, RotamerChange):
                d = self._design(action, parent, rng, palette)
            else:
                d = self._move(action, parent, rng)
            out.append(Design(d.sequence, d.ca, self.score(d), d.payload))
        return out

    # --- rotamer_change: simulated annealing over the designable positions -------------------
    def _design(
        self, a: RotamerChange, parent: Design, rng: np.random.Generator, palette: Sequence[str]
    ) -> Design:
        seq = list(parent.sequence)
        xy = np.asarray(parent.payload)
        lay = self.layers(parent)
        pos = np.flatnonzero(resolve_selector(a.design_selector, seq, lay))
        allowed = sorted(
            (set(a.restrict) if a.restrict is not None else set(palette)) - set(a.prohibit)
        )
        if not len(pos) or not allowed:
            return parent
        c = contact_matrix(xy)
        design_mask = np.zeros(len(seq), bool)
        design_mask[pos] = True

        def energy(s: list[str]) -> float:
            h = np.array([t in self.hydrophobic for t in s])
            e = -float((c & h[:, None] & h[None, :]).sum() // 2)
            for p in a.composition_penalties:
                count = sum(s[j] in p.types for j in pos)
                target = p.target * len(pos) if p.fraction else p.target
                e += p.weight * abs(count - target)
            return e

        e = energy(seq)
        steps = a.repeats * self.sweeps * len(pos)
        temps = np.geomspace(2.0, 0.05, max(steps, 1))
        for t in temps:
            trial = list(seq)
            if len(pos) > 1 and rng.random() < 0.5:  # swap two designable residues
                j, k = rng.choice(pos, size=2, replace=False)
                trial[j], trial[k] = trial[k], trial[j]
            else:  # mutate one
                trial[int(rng.choice(pos))] = allowed[int(rng.integers(len(allowed)))]
            if any(
                s not in allowed
                for j, s in enumerate(trial)
                if design_mask[j] and trial[j] != seq[j]
            ):
                continue  # a swap may not carry a type outside the palette
            e_new = energy(trial)
            if e_new <= e or rng.random() < np.exp(-(e_new - e) / t):
                seq, e = trial, e_new
        return lattice_design(seq, xy)

    # --- backbone_change: Metropolis over lattice moves ---------------------------------------
    def _move(self, a: BackboneChange, parent: Design, rng: np.random.Generator) -> Design:
        xy = np.asarray(parent.payload).copy()
        seq = parent.sequence
        h = np.array([s in self.hydrophobic for s in seq])
        pos = np.flatnonzero(resolve_selector(a.selector, seq, self.layers(parent)))
        if not len(pos):
            return parent
        e = hp_energy(h, xy)
        for _ in range(a.nmoves):
            i = int(rng.choice(pos))
            trial = _propose(a.mover, xy, i, rng)
            if trial is None or not is_self_avoiding(trial):
                continue
            e_new = hp_energy(h, trial)
            if e_new <= e or rng.random() < np.exp(-(e_new - e) / a.temperature):
                xy, e = trial, e_new
        return lattice_design(seq, xy)


def _propose(mover: str, xy: np.ndarray, i: int, rng: np.random.Generator) -> np.ndarray | None:
    n = len(xy)
    t = xy.copy()
    if mover == "backrub":  # pivot: rotate the shorter side of the chain about residue i by ±90°
        rot = np.array([[0, -1], [1, 0]]) if rng.random() < 0.5 else np.array([[0, 1], [-1, 0]])
        side = np.arange(i + 1, n) if n - i - 1 <= i else np.arange(0, i)
        t[side] = (t[side] - t[i]) @ rot.T + t[i]
        return t
    if mover == "small":  # end move or corner flip at i
        if i == 0 or i == n - 1:
            nb = xy[1] if i == 0 else xy[-2]
            t[i] = nb + _DIRS[int(rng.integers(4))]
            return t
        a, b = xy[i - 1], xy[i + 1]
        if np.abs(a - b).sum() != 2 or (a == b).any():
            return None  # straight segment: no corner to flip
        t[i] = a + b - xy[i]
        return t
    # shear: crankshaft of (i, i+1) across the (i-1, i+2) axis
    if i < 1 or i + 2 >= n:
        return None
    a, b = xy[i - 1], xy[i + 2]
    if np.abs(a - b).sum() != 1:
        return None
    t[i], t[i + 1] = 2 * a - xy[i], 2 * b - xy[i + 1]
    return t


def hp_task(
    n: int = 10,
    n_h: int = 5,
    *,
    nstruct: int = 16,
    max_steps: int = 20,
    ncaa: Sequence[str] = (),
    hydrophobic: frozenset[str] | None = None,
) -> Task:
    """Design an n-residue HP chain with exactly ``n_h`` hydrophobic residues, minimum energy.

    Start: the extended chain, all serine (polar). Objectives: ``total_score`` (HP energy),
    ``composition_error`` = |#H - n_h| and ``rmsd_to_init``; feasible means
    ``composition_error == 0``, so the best feasible energy is compared with ``hp_optimum``.
    ``ncaa``: non-canonical types the task offers; ``hydrophobic``: the H set, which must be
    the backend's (``HPBackend(hydrophobic=...)``, e.g. ``HYDROPHOBIC | {"TRF"}``), so that a
    non-canonical H residue counts in ``composition_error`` as it does in the energy.
    """
    if not 2 <= n <= 14 or not 0 <= n_h <= n:
        raise ValueError(f"need 2 <= n <= 14 and 0 <= n_h <= n, got n={n}, n_h={n_h}")
    h_set = HYDROPHOBIC if hydrophobic is None else frozenset(hydrophobic)
    start = straight_chain(["SER"] * n)

    def composition(d: Design) -> dict[str, float]:
        return {"composition_error": float(abs(sum(s in h_set for s in d.sequence) - n_h))}

    return Task(
        name=f"hp{n}",
        description=(
            f"design a {n}-residue chain on the 2-D square lattice (HP model) with exactly {n_h} "
            f"hydrophobic residues ({', '.join(sorted(h_set))}) and the lowest energy "
            "(-1 per contact between hydrophobic residues that are not chain neighbours)"
        ),
        start=start,
        objectives={"total_score": "min", "composition_error": "min", "rmsd_to_init": "min"},
        constraints={"composition_error": 0.0},
        extra_metrics=composition,
        ncaa=tuple(ncaa),
        nstruct=nstruct,
        max_steps=max_steps,
    )
