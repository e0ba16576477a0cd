"""icml26-extramerge: Extra-Merge: extrapolate merged pre-training checkpoints along their rank-1 subspace (Zhou et al., 2026)."""

__version__ = "0.1.0"

__all__ = ["__version__"]
