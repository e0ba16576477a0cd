"""Which implementation a kernel call runs: one function decides, and says why.

Three backends exist for every fast kernel in this package:

=====================  ==================================================================
``"triton"``           the Triton kernel, compiled for a CUDA device
``"triton_interpret"`` the same Triton kernel run by Triton's interpreter on the CPU
                       (``TRITON_INTERPRET=1``); slow, used to test kernels without a GPU
``"torch"``            the plain-PyTorch reference that sits beside each kernel
=====================  ==================================================================

:func:`select_backend` returns a :class:`BackendChoice` (backend + reason), so a caller (and a
user debugging a slow run) can see *why* a path was taken. There is no silent fallback: if a
Triton kernel was asked for explicitly (``prefer="triton"`` or ``ICML26_KERNELS_BACKEND=triton``)
and cannot run, :func:`select_backend` raises instead of quietly running the reference.

Note: Triton decides at *decoration* time whether ``@triton.jit`` builds an interpreted
function, so ``TRITON_INTERPRET=1`` must be set before a kernel module is imported (tests do
this in ``conftest.py``).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import warnings
from dataclasses import dataclass
from typing import Any, Literal

Backend = Literal["triton", "triton_interpret", "torch"]
BACKENDS: tuple[Backend, ...] = ("triton", "triton_interpret", "torch")
ENV_VAR = "ICML26_KERNELS_BACKEND"
_REQUESTS = ("auto", "triton", "torch")

__all__ = [
    "BACKENDS",
    "ENV_VAR",
    "Backend",
    "BackendChoice",
    "available_backends",
    "interpreter_enabled",
    "missing_torch",
    "select_backend",
    "torch_installed",
    "triton_installed",
]

TORCH_EXTRA = 'pip install "icml26-kernels[torch]"'
TRITON_EXTRA = 'pip install "icml26-kernels[triton]"'


@dataclass(frozen=True)
class BackendChoice:
    """The backend a call will run, and the reason it was chosen."""

    backend: Backend
    reason: str

    @property
    def uses_triton(self) -> bool:
        return self.backend != "torch"


def _found(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent that fails, or a module with no spec
        return False


_triton_error: str | None = None  # why an installed triton did not import (set by triton_installed)


@functools.cache
def triton_installed() -> bool:
    """True when the ``triton`` package is installed **and imports**.

    A triton that is present but fails to import counts as absent, with one ``RuntimeWarning``
    naming the cause: triton 3.0-3.2 (pinned by torch 2.4-2.6's CUDA wheels) import setuptools
    at import time without declaring it, and a uv venv (or any Python >= 3.12 venv) has none, so
    ``import icml26_kernels.moe`` used to fail inside triton (found by ``nox -s lowest``). The
    kernels' ``[triton]`` extra asks for triton >= 3.4: 3.3 imports without setuptools, but its
    ``triton.autotune`` decorator asks for a GPU driver at import, which a CPU machine lacks.
    """
    global _triton_error
    if not _found("triton"):
        return False
    try:
        import triton
        import triton.language  # noqa: F401
    except Exception as exc:  # any failure inside triton's own import
        _triton_error = f"{type(exc).__name__}: {exc}"
        warnings.warn(
            f"triton is installed but does not import ({_triton_error}); the Triton kernels are "
            "off and the torch reference runs. Install triton>=3.4 (or setuptools) to use them",
            RuntimeWarning,
            stacklevel=2,
        )
        return False
    return True


def _triton_missing() -> str:
    """How select_backend names an absent triton: not installed, or installed and broken."""
    if _triton_error is None:
        return "triton is not installed"
    return f"triton is installed but does not import ({_triton_error})"


@functools.cache
def torch_installed() -> bool:
    """True when ``torch`` can be imported (checked without importing it)."""
    return _found("torch")


def missing_torch(module: str, cause: BaseException | None = None) -> ModuleNotFoundError:
    """The error raised when ``module`` is imported without torch: it names the extra to install.

    :mod:`icml26_kernels.attention` and :mod:`icml26_kernels.moe` import torch first and raise
    this instead of a bare ``No module named 'torch'``.
    """
    why = f" ({cause})" if cause is not None else ""
    return ModuleNotFoundError(
        f"{module} needs PyTorch, which is not installed{why}: {TORCH_EXTRA} "
        f"(or {TRITON_EXTRA} for the GPU kernels as well)",
        name="torch",
    )


def interpreter_enabled() -> bool:
    """True when ``TRITON_INTERPRET=1``: Triton kernels run on the CPU through the interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _device_type(device: Any) -> str:
    """'cuda', 'cpu', ... from a torch.device, a tensor, a string or None (None means cpu)."""
    if device is None:
        return "cpu"
    if isinstance(device, str):
        return device.split(":", 1)[0]
    dev = getattr(device, "device", device)  # a tensor has .device
    kind = getattr(dev, "type", None)
    if not isinstance(kind, str):
        raise TypeError(
            f"device must be a torch.device, a tensor, a string like 'cuda:0' or None; got {type(device).__name__}"
        )
    return kind


def select_backend(device: Any = None, *, prefer: str | None = None) -> BackendChoice:
    """Decide which implementation runs for inputs on ``device``.

    Args:
        device: where the inputs live (tensor, ``torch.device``, ``"cuda:0"``, or None = CPU).
        prefer: ``"auto"`` (default), ``"triton"`` (a Triton kernel or an error) or ``"torch"``
            (the reference). When None, the environment variable ``ICML26_KERNELS_BACKEND``
            is read, defaulting to ``"auto"``.

    Returns:
        A :class:`BackendChoice`. Rules, in order: ``"torch"`` if asked for; the Triton
        interpreter if ``TRITON_INTERPRET=1`` and triton is installed; compiled Triton for CUDA
        inputs when triton is installed; otherwise the torch reference (``auto``) or a
        ``RuntimeError`` (``triton`` was demanded).
    """
    requested = prefer if prefer is not None else os.environ.get(ENV_VAR, "auto")
    if requested not in _REQUESTS:
        source = "prefer" if prefer is not None else ENV_VAR
        raise ValueError(f"{source} must be one of {_REQUESTS}; got {requested!r}")
    kind = _device_type(device)
    if requested == "torch":
        return BackendChoice("torch", f"torch reference requested ({ENV_VAR} or prefer='torch')")
    if not torch_installed():
        missing = "torch and triton are" if not triton_installed() else "torch is"
        if requested == "triton":
            raise RuntimeError(
                f"a Triton kernel was requested but {missing} not installed; {TRITON_EXTRA}"
            )
        return BackendChoice(
            "torch",
            f"{missing} not installed, so neither a kernel nor the torch reference can run; "
            f"{TORCH_EXTRA} (or {TRITON_EXTRA} for the GPU kernels)",
        )
    if not triton_installed():
        if requested == "triton":
            raise RuntimeError(
                f"a Triton kernel was requested but {_triton_missing()}; "
                f"{TRITON_EXTRA} or request prefer='torch'"
            )
        return BackendChoice("torch", f"{_triton_missing()} ({TRITON_EXTRA} for the kernels)")
    if interpreter_enabled():
        return BackendChoice(
            "triton_interpret", "TRITON_INTERPRET=1: Triton kernel on the CPU interpreter"
        )
    if kind == "cuda":
        return BackendChoice("triton", "CUDA inputs and triton installed")
    if requested == "triton":
        raise RuntimeError(
            f"a Triton kernel was requested for {kind!r} inputs; Triton compiles for CUDA only. "
            "Move the inputs to a GPU or set TRITON_INTERPRET=1 (before importing the kernels) "
            "to run the kernel on the CPU interpreter"
        )
    return BackendChoice("torch", f"{kind} inputs without TRITON_INTERPRET=1: torch reference")


def available_backends() -> list[Backend]:
    """The backends that can run on this machine now (always includes ``"torch"``)."""
    out: list[Backend] = []
    if triton_installed():
        try:
            import torch

            if torch.cuda.is_available():
                out.append("triton")
        except ImportError:
            pass
        if interpreter_enabled():
            out.append("triton_interpret")
    out.append("torch")
    return out
