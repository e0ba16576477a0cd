"""icml26_kernels.attention (filled by the package issue that needs it)."""

__all__: list[str] = []
