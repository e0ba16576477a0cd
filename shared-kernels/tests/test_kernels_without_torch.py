"""Without torch, the torch subpackages say which extra to install, and so does select_backend.

Each case runs in a fresh interpreter where ``torch`` (and ``triton``) cannot be imported
(``sys.modules[name] = None``, which makes ``import`` raise and ``find_spec`` return None), so
the result does not depend on what this environment has installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

BLOCK = "import sys\nfor _m in {mods!r}:\n    sys.modules[_m] = None\n"


def run_without(mods: list[str], body: str) -> dict:
    code = BLOCK.format(mods=mods) + textwrap.dedent(body)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


IMPORT = """
import json
try:
    import {module}
except ImportError as exc:
    print(json.dumps({{"type": type(exc).__name__, "msg": str(exc), "name": exc.name}}))
else:
    print(json.dumps({{"type": None}}))
"""


@pytest.mark.parametrize("module", ["icml26_kernels.attention", "icml26_kernels.moe"])
def test_torch_subpackages_name_the_extra(module):
    got = run_without(["torch", "triton"], IMPORT.format(module=module))
    assert got["type"] == "ModuleNotFoundError" and got["name"] == "torch"
    assert module in got["msg"]
    assert 'pip install "icml26-kernels[torch]"' in got["msg"]


def test_numpy_only_parts_import_without_torch():
    """The top-level package, the backend and tensornet need no torch (torch arrays only)."""
    got = run_without(
        ["torch", "triton"],
        """
        import json
        import numpy as np
        import icml26_kernels
        from icml26_kernels.tensornet import GraphTopology, contract, init_cores, multilinear_vectors
        topo = GraphTopology.from_edges(3, [(0, 1), (1, 2)], bond_dim=2)
        cores = init_cores(topo, seed=0)
        z = multilinear_vectors(np.array([[0.0, 1.0, 0.5]]))
        print(json.dumps({"shape": list(np.shape(contract(topo, cores, z)))}))
        """,
    )
    assert got == {"shape": [1]}


SELECT = """
import json
from icml26_kernels import select_backend
c = select_backend("cuda")
try:
    select_backend("cuda", prefer="triton")
    err = None
except RuntimeError as exc:
    err = str(exc)
print(json.dumps({"backend": c.backend, "reason": c.reason, "err": err}))
"""


def test_select_backend_names_torch_when_torch_is_missing():
    got = run_without(["torch", "triton"], SELECT)
    assert got["backend"] == "torch"
    assert "torch and triton are not installed" in got["reason"]
    assert 'pip install "icml26-kernels[torch]"' in got["reason"]
    assert "torch and triton are not installed" in got["err"]


def test_select_backend_names_triton_when_only_triton_is_missing():
    pytest.importorskip("torch")
    got = run_without(["triton"], SELECT)
    assert got["backend"] == "torch"
    assert got["reason"].startswith("triton is not installed") and "torch is" not in got["reason"]
    assert "triton is not installed" in got["err"]


def test_a_triton_that_fails_to_import_counts_as_absent(tmp_path):
    """nox lowest: torch 2.6's CUDA wheel pins triton 3.2, whose import needs setuptools.

    In a uv venv (no setuptools) ``import icml26_latentmoe`` died inside triton, because the
    kernels only checked that triton was *found*. A stand-in triton that raises the same error
    shadows the real one here: the kernels import, warn once naming the cause, run the torch
    reference, and a demanded Triton kernel raises that cause.
    """
    pytest.importorskip("torch")
    fake = tmp_path / "triton"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'setuptools'\", name='setuptools')\n"
    )
    code = textwrap.dedent(
        """
        import json, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import icml26_kernels.moe, icml26_kernels.attention
            from icml26_kernels import backend as be
            choice = be.select_backend("cuda")
        try:
            be.select_backend("cuda", prefer="triton")
            err = ""
        except RuntimeError as exc:
            err = str(exc)
        msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        print(json.dumps({"backend": choice.backend, "reason": choice.reason, "err": err,
                          "warnings": msgs}))
        """
    )
    path = [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["backend"] == "torch"
    assert "does not import (ModuleNotFoundError: No module named 'setuptools')" in got["reason"]
    assert "does not import" in got["err"] and "setuptools" in got["err"]
    assert len(got["warnings"]) == 1 and "triton>=3.4" in got["warnings"][0]
