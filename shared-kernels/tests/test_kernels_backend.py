"""The backend decision is explicit: each rule is checked, including the refusals."""

from __future__ import annotations

import icml26_kernels
import pytest
from icml26_kernels import backend as be


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.delenv(be.ENV_VAR, raising=False)
    return monkeypatch


def test_public_api_pinned():
    assert sorted(icml26_kernels.__all__) == sorted(
        ["Backend", "BackendChoice", "__version__", "available_backends", "select_backend"]
    )


def test_torch_requested_always_wins(clean_env):
    clean_env.setenv("TRITON_INTERPRET", "1")
    choice = be.select_backend("cuda:0", prefer="torch")
    assert choice.backend == "torch" and not choice.uses_triton


def test_env_var_is_read_when_prefer_is_none(clean_env):
    clean_env.setenv(be.ENV_VAR, "torch")
    assert be.select_backend("cuda").backend == "torch"


def test_cpu_without_interpreter_uses_reference(clean_env):
    choice = be.select_backend("cpu")
    assert choice.backend == "torch"
    assert "cpu" in choice.reason or "not installed" in choice.reason


@pytest.mark.skipif(not be.triton_installed(), reason="triton not installed")
def test_interpreter_flag_selects_interpreted_kernel(clean_env):
    clean_env.setenv("TRITON_INTERPRET", "1")
    assert be.select_backend(None).backend == "triton_interpret"
    assert "triton_interpret" in be.available_backends()


@pytest.mark.skipif(not be.triton_installed(), reason="triton not installed")
def test_cuda_inputs_select_compiled_triton(clean_env):
    assert be.select_backend("cuda:1").backend == "triton"


@pytest.mark.skipif(not be.triton_installed(), reason="triton not installed")
def test_demanding_triton_on_cpu_raises_instead_of_falling_back(clean_env):
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        be.select_backend("cpu", prefer="triton")


def test_demanding_triton_without_triton_raises(clean_env, monkeypatch):
    monkeypatch.setattr(be, "triton_installed", lambda: False)
    with pytest.raises(RuntimeError, match="not installed"):
        be.select_backend("cuda", prefer="triton")
    assert be.select_backend("cuda").backend == "torch"


def test_bad_request_names_the_argument(clean_env):
    with pytest.raises(ValueError, match="prefer must be one of"):
        be.select_backend("cpu", prefer="cuda")
    clean_env.setenv(be.ENV_VAR, "fast")
    with pytest.raises(ValueError, match=be.ENV_VAR):
        be.select_backend("cpu")


def test_device_forms():
    torch = pytest.importorskip("torch")
    t = torch.zeros(1)
    assert be._device_type(t) == "cpu"
    assert be._device_type(torch.device("cuda", 0)) == "cuda"
    assert be._device_type("cuda:3") == "cuda"
    with pytest.raises(TypeError, match="device must be"):
        be._device_type(3.5)


def test_torch_always_available():
    assert be.available_backends()[-1] == "torch"
