"""Test-only fixes for bf16 under Triton's CPU interpreter (``TRITON_INTERPRET=1``).

The interpreter stores bf16 tensors as their uint16 bit patterns, and two of its builder
methods get bf16 wrong (read in Triton 3.8.0 and 3.9.0, ``triton/runtime/interpreter.py``):

* ``InterpreterBuilder.create_dot`` hands the uint16 patterns to ``np.matmul`` as integers:
  a 16×16 bf16 dot comes out ~1e9 times too large (fp16 and fp32 are exact);
* ``InterpreterBuilder.cast_impl`` converts fp32 to bf16 by dropping the low 16 bits (round
  toward zero), where a GPU's ``cvt.rn.bf16.f32`` rounds to nearest even: every stored bf16
  output and every bf16 operand made in-kernel (the grouped MLP's hidden activation) is biased
  toward zero by half an ulp on average, which doubles the kernels' bf16 error.

The ``bf16_interpreter`` fixture replaces both, for the test that asks for it, by what the GPU
does: in a dot, bf16 operands widened to fp32 (exact: an 8-bit significand product fits fp32's
24), products summed in fp32 plus the fp32 accumulator (an MMA); fp32 → bf16 rounded to
nearest even. Every other dtype goes to the interpreter's own code.

Guarded because it touches a private API: the patch is applied only for a Triton version in
:data:`VERIFIED` *and* when both methods and ``_convert_float`` exist with the signatures read
here; otherwise every test that needs it is skipped with the reason. On a GPU (compiled
Triton) the fixture does nothing. ``ICML26_NO_BF16_PATCH=1`` runs the bf16 tests on the
unpatched interpreter, which is how to see them fail (the dot bug alone: errors ~1e8).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re

import pytest

# Triton (major, minor) releases whose interpreter create_dot / cast_impl were read (both bugs)
VERIFIED = ((3, 8), (3, 9))
_SIGNATURES = {
    "create_dot": ["self", "a", "b", "d", "input_precision", "max_num_imprecise_acc"],
    "cast_impl": ["self", "src", "dst_type"],
}
_STATE: dict[str, object] = {}


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "tiles: every tile / autotune configuration under the interpreter (minutes); "
        "excluded by default, run with -m tiles",
    )


def pytest_collection_modifyitems(config, items):
    """``tiles`` tests run only when ``-m`` names them (the default -m is 'not slow and not gpu')."""
    if "tiles" in (config.option.markexpr or ""):
        return
    keep = [it for it in items if "tiles" not in it.keywords]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[it for it in items if "tiles" in it.keywords])
        items[:] = keep


def _interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _guard() -> tuple[object, str]:
    """(InterpreterBuilder, "") when the patch may be applied, else (None, reason to skip)."""
    try:
        import triton
        from triton.runtime import interpreter
    except ImportError as exc:
        return None, f"Triton's interpreter is not importable ({exc})"
    m = re.match(r"(\d+)\.(\d+)", triton.__version__)
    version = (int(m.group(1)), int(m.group(2))) if m else None
    if version not in VERIFIED:
        return None, (
            f"bf16 under TRITON_INTERPRET=1 is patched only for Triton "
            f"{', '.join(f'{a}.{b}' for a, b in VERIFIED)} (the versions whose private "
            f"interpreter API was read); found {triton.__version__}: re-read "
            f"InterpreterBuilder.create_dot / cast_impl and extend tests/conftest.py VERIFIED"
        )
    builder = getattr(interpreter, "InterpreterBuilder", None)
    for name, params in _SIGNATURES.items():
        fn = getattr(builder, name, None)
        if fn is None or list(inspect.signature(fn).parameters) != params:
            return None, f"Triton {triton.__version__}: InterpreterBuilder.{name} changed"
    if not hasattr(interpreter, "_convert_float") or not hasattr(interpreter, "TensorHandle"):
        return None, f"Triton {triton.__version__}: interpreter helpers changed"
    return builder, ""


def _bf16_bits(f32):
    """fp32 array -> bf16 bit patterns (uint16), round to nearest even (NaN stays NaN)."""
    import numpy as np

    f32 = np.ascontiguousarray(f32, dtype=np.float32)
    bits = f32.view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    return np.where(np.isnan(f32), np.uint16(0x7FC0), rounded)


def _patches(builder):
    """The replacement create_dot and cast_impl (bf16 only; everything else unchanged)."""
    import numpy as np
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    bf16 = tl.bfloat16
    dot0, cast0 = builder.create_dot, builder.cast_impl

    def widen(data):  # bf16 bits -> fp32, exact
        return (np.asarray(data, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.dtype.scalar != bf16 and b.dtype.scalar != bf16:
            return dot0(self, a, b, d, input_precision, max_num_imprecise_acc)
        a32 = widen(a.data) if a.dtype.scalar == bf16 else a.data.astype(np.float32)
        b32 = widen(b.data) if b.dtype.scalar == bf16 else b.data.astype(np.float32)
        prod = np.matmul(a32, b32, dtype=np.float32)
        if d.dtype.scalar == bf16:  # a bf16 accumulator (out_dtype=tl.bfloat16)
            return TensorHandle(_bf16_bits(prod + widen(d.data)), bf16)
        out = prod.astype(d.data.dtype) + d.data
        if _STATE.get("bf16_accumulator"):  # the planted mutant: accumulator rounded to bf16
            out = widen(_bf16_bits(out)).astype(d.data.dtype)
        return TensorHandle(out, d.dtype.scalar)

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == bf16:
            return TensorHandle(_bf16_bits(src.data), bf16)
        return cast0(self, src, dst_type)

    create_dot.__wrapped__, cast_impl.__wrapped__ = dot0, cast0
    return {"create_dot": create_dot, "cast_impl": cast_impl}


def bf16_patch_status() -> tuple[bool, str]:
    """(patch usable, reason if not); computed once."""
    if "status" not in _STATE:
        builder, reason = _guard()
        _STATE["status"] = (builder is not None, reason)
        _STATE["builder"] = builder
    return _STATE["status"]  # type: ignore[return-value]


class Bf16Interpreter:
    """What the ``bf16_interpreter`` fixture yields: whether the patch is live, and controls."""

    def __init__(self, builder=None):
        self.builder = builder
        self.patched = builder is not None

    @contextlib.contextmanager
    def unpatched(self):
        """The interpreter's own create_dot and cast_impl for the body (the bugs still there)."""
        if not self.patched:
            yield
            return
        live = {name: getattr(self.builder, name) for name in _SIGNATURES}
        for name, fn in live.items():
            setattr(self.builder, name, fn.__wrapped__)
        try:
            yield
        finally:
            for name, fn in live.items():
                setattr(self.builder, name, fn)

    @contextlib.contextmanager
    def bf16_accumulator(self):
        """A planted mutant for the body: the fp32 accumulator of every bf16 dot rounded to bf16
        after each call (each K step of BLOCK_D / BLOCK_K / BLOCK_R products), as a kernel that
        accumulated in bf16 would be."""
        if not self.patched:
            pytest.skip("the bf16-accumulator mutant needs the interpreter patch")
        _STATE["bf16_accumulator"] = True
        try:
            yield
        finally:
            _STATE["bf16_accumulator"] = False


@pytest.fixture
def bf16_interpreter():
    """bf16 ``tl.dot`` and fp32→bf16 casts as on a GPU under the interpreter, for one test
    (a no-op when Triton is compiled, or with ``ICML26_NO_BF16_PATCH=1``)."""
    if not _interpreted() or os.environ.get("ICML26_NO_BF16_PATCH") == "1":
        yield Bf16Interpreter()
        return
    ok, reason = bf16_patch_status()
    if not ok:
        pytest.skip(reason)
    builder = _STATE["builder"]
    with pytest.MonkeyPatch.context() as mp:
        for name, fn in _patches(builder).items():
            mp.setattr(builder, name, fn)
        yield Bf16Interpreter(builder)
