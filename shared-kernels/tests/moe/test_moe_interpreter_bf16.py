"""The test-only bf16 patch of Triton's interpreter (tests/conftest.py): the bugs it works
around are still there in the verified Triton versions, and the patched dot and cast behave as
a GPU's (an fp32-accumulated MMA; fp32 → bf16 rounded to nearest even)."""

import os

import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
DEV = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def _dot16(A, B, C, CB):
    r = tl.arange(0, 16)
    a = tl.load(A + r[:, None] * 16 + r[None, :])
    b = tl.load(B + r[:, None] * 16 + r[None, :])
    c = tl.dot(a, b)
    tl.store(C + r[:, None] * 16 + r[None, :], c)  # fp32
    tl.store(CB + r[:, None] * 16 + r[None, :], c.to(tl.bfloat16))  # fp32 -> bf16


def _run(dtype):
    """(relative max error of the fp32 dot, bf16 copies of it that differ from RTNE)."""
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(16, 16, generator=g).to(DEV, dtype) for _ in range(2))
    c = torch.empty(16, 16, device=DEV)
    cb = torch.empty(16, 16, device=DEV, dtype=torch.bfloat16)
    _dot16[(1,)](a, b, c, cb)
    want = a.double() @ b.double()  # bf16 / fp16 products are exact in fp32; only the sum rounds
    err = float((c.double() - want).abs().max() / want.abs().max())
    return err, int((cb != c.bfloat16()).sum())


def _skip_if_disabled(patch):
    if INTERPRETED and not patch.patched:
        pytest.skip("ICML26_NO_BF16_PATCH=1: patch disabled")


@pytest.mark.skipif(not INTERPRETED, reason="the interpreter's bugs; compiled Triton has none")
def test_interpreter_bf16_is_wrong_unpatched_and_right_patched(bf16_interpreter):
    _skip_if_disabled(bf16_interpreter)
    assert _run(torch.float16)[0] < 1e-6  # fp16 never needed a patch
    with bf16_interpreter.unpatched():
        err, wrong = _run(torch.bfloat16)
    # both bugs still present: if one of these fails, this Triton fixed it and
    # tests/conftest.py should stop patching it
    assert err > 1e3, f"the unpatched bf16 dot is right now (rel err {err:.1e})"
    assert wrong > 50, f"the unpatched fp32->bf16 cast rounds to nearest now ({wrong} of 256)"


def test_bf16_dot_and_cast_as_on_a_gpu(bf16_interpreter):
    """Compiled on a GPU (the real MMA and cvt.rn) or interpreted with the patch: same bound."""
    _skip_if_disabled(bf16_interpreter)
    err, wrong = _run(torch.bfloat16)
    assert err < 1e-6 and wrong == 0, (err, wrong)


def test_bf16_accumulator_mutant_is_live(bf16_interpreter):
    """The planted mutant used by the tolerance tests really rounds the accumulator."""
    if not INTERPRETED:
        pytest.skip("the mutant is an interpreter patch")
    _skip_if_disabled(bf16_interpreter)
    with bf16_interpreter.bf16_accumulator():
        err, _ = _run(torch.bfloat16)
    assert 1e-4 < err < 1e-2, err


def test_the_guard_refuses_an_unverified_triton_or_a_changed_api(monkeypatch):
    """A Triton outside the verified versions, or a create_dot with another signature, gets no
    patch: the bf16 tests then skip with this reason instead of running on a guess."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "conftest.py"
    spec = importlib.util.spec_from_file_location("_kernels_conftest_copy", path)
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    monkeypatch.setattr(triton, "__version__", "9.9.0")
    builder, reason = conf._guard()
    assert builder is None and "found 9.9.0" in reason and "VERIFIED" in reason
    monkeypatch.setattr(triton, "__version__", "3.9.0")
    from triton.runtime import interpreter

    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_dot", lambda self, a, b, d: None)
    builder, reason = conf._guard()
    assert builder is None and "create_dot changed" in reason
