"""Machine provenance for benchmark JSON: which CPU, which kernels, which library versions.

Floating-point results of a benchmark depend on the machine: another CPU (AVX2 against
AVX-512), another BLAS kernel or another thread count rounds differently, and a long training
run amplifies the last bit. "Reruns are identical" therefore holds on one machine, and every
benchmark row records that machine: ``nox -s reproduce`` runs this file in the member's own
environment and stores its output in ``benchmarks/reproduce_row.json``. Members that depend on
icml26-kernels also put it into their detailed JSON::

    from icml26_kernels.provenance import machine_info
    result["machine"] = machine_info()

Standard library only (runnable as a script: `python provenance.py` prints the JSON); torch is
imported only when installed, for its kernel level and threads; versions are read from
the installed distributions' metadata.
"""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from typing import Any

__all__ = ["cpu_model", "machine_info"]

_LIBRARIES = ("torch", "jax", "jaxlib", "numpy", "scipy", "transformers", "triton")


def cpu_model() -> str:
    """The CPU's marketing name (``model name`` in /proc/cpuinfo), else ``platform.processor()``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    """A JSON-ready description of the machine a benchmark ran on.

    Keys: ``cpu`` (model name), ``arch``, ``os``, ``python``, ``logical_cpus``, ``cpu_capability``
    (torch's ATen kernel level, e.g. ``AVX512`` or ``AVX2``; ``None`` without torch),
    ``torch_threads`` (``None`` without torch), ``env`` (the thread and kernel variables that are
    set), ``versions`` (installed versions of torch, jax, numpy, ...; absent ones omitted), and
    ``gpu`` (CUDA device name when torch sees one, else ``None``).
    """
    info: dict[str, Any] = {
        "cpu": cpu_model(),
        "arch": platform.machine(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "logical_cpus": os.cpu_count(),
        "cpu_capability": None,
        "torch_threads": None,
        "gpu": None,
    }
    env_keys = (
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_ENABLE_INSTRUCTIONS",
        "ATEN_CPU_CAPABILITY",
        "OPENBLAS_CORETYPE",
        "XLA_FLAGS",
    )
    info["env"] = {k: os.environ[k] for k in env_keys if k in os.environ}
    # torch only if it is installed: a numpy-only benchmark does not pay for importing it
    if "torch" in sys.modules or _version("torch") is not None:
        try:
            import torch

            info["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
            info["torch_threads"] = torch.get_num_threads()
            if torch.cuda.is_available():
                info["gpu"] = torch.cuda.get_device_name(0)
        except Exception:  # a broken torch install must not break a benchmark's JSON
            pass
    info["versions"] = {d: v for d in _LIBRARIES if (v := _version(d)) is not None}
    return info


if __name__ == "__main__":  # standard library only: nox runs this file in any member's env
    import json

    print(json.dumps(machine_info()))
