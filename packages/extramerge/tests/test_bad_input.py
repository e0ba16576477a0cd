"""Bad input: a clear error naming the argument / checkpoint / key."""

import pytest
import torch
from icml26_extramerge import ema, extra_merge, merged_trajectory, rank1_report, sma, weighted_merge


def _ck(i=0):
    return {"w": torch.full((2, 3), float(i)), "b": torch.zeros(3) + i}


def test_mismatched_keys_name_checkpoint_and_key():
    bad = {"w": torch.zeros(2, 3), "c": torch.zeros(3)}
    with pytest.raises(ValueError, match=r"checkpoint 2.*missing \['b'\].*unexpected \['c'\]"):
        sma([_ck(0), _ck(1), bad])


def test_mismatched_shapes_name_checkpoint_and_key():
    bad = {"w": torch.zeros(3, 2), "b": torch.zeros(3)}
    with pytest.raises(ValueError, match=r"checkpoint 1, key 'w': shape \(3, 2\)"):
        merged_trajectory([_ck(0), bad, _ck(2)], window=2)
    with pytest.raises(ValueError, match=r"trajectory\[1\], key 'w'"):
        rank1_report([_ck(0), bad])


def test_nan_parameters_name_checkpoint_and_key():
    bad = _ck(1)
    bad["b"][1] = float("nan")
    with pytest.raises(ValueError, match=r"checkpoint 1, key 'b': contains NaN"):
        sma([_ck(0), bad])
    with pytest.raises(ValueError, match=r"trajectory\[1\], key 'b': contains NaN"):
        extra_merge([_ck(0), bad], alpha=1.0)


def test_fewer_than_two_checkpoints():
    with pytest.raises(ValueError, match="trajectory: need at least two"):
        extra_merge([_ck(0)])
    with pytest.raises(ValueError, match="trajectory: need at least two"):
        rank1_report([_ck(0)])
    with pytest.raises(ValueError, match="checkpoints: need at least one"):
        sma([])


def test_bad_arguments():
    cks = [_ck(i) for i in range(3)]
    with pytest.raises(ValueError, match="window: 4 exceeds"):
        merged_trajectory(cks, window=4)
    with pytest.raises(ValueError, match="window: must be a positive int"):
        merged_trajectory(cks, window=0)
    with pytest.raises(ValueError, match="weights: 4 weights for 3 checkpoints"):
        weighted_merge(cks, [0.25] * 4)
    with pytest.raises(ValueError, match="weights: 2 weights for more than 2"):
        weighted_merge(cks, [0.5, 0.5])
    with pytest.raises(ValueError, match="weights: must be finite"):
        weighted_merge(cks, [0.5, float("inf"), 0.5])
    with pytest.raises(ValueError, match="decay: must lie in"):
        ema(cks, 1.0)
    with pytest.raises(ValueError, match="direction: expected"):
        extra_merge(cks, direction="pca")
    with pytest.raises(ValueError, match="alpha: must be finite"):
        extra_merge(cks, alpha=float("nan"))
    with pytest.raises(ValueError, match="alphas: need at least one"):
        extra_merge(cks, eval_fn=lambda sd: 0.0, alphas=())
    with pytest.raises(ValueError, match="eval_fn: returned NaN"):
        extra_merge(cks, eval_fn=lambda sd: float("nan"))
    with pytest.raises(ValueError, match="zero variance"):
        rank1_report([_ck(1), _ck(1)])
    with pytest.raises(TypeError, match=r"checkpoint 0: expected a state dict"):
        sma([torch.zeros(3)])
    with pytest.raises(FileNotFoundError, match="no such checkpoint"):
        sma(["/nonexistent/x.safetensors"])


def test_empty_state_dicts_raise():
    with pytest.raises(ValueError, match=r"trajectory\[0\]: empty state dict"):
        extra_merge([{}, {}])
    with pytest.raises(ValueError, match=r"checkpoint 0: empty state dict"):
        sma([{}])
    with pytest.raises(ValueError, match=r"checkpoint 1: empty state dict"):
        merged_trajectory([_ck(0), {}], window=1)
    with pytest.raises(ValueError, match=r"trajectory\[0\]: empty state dict"):
        rank1_report([{}, {}])
    ints = [{"n": torch.tensor(i)} for i in range(2)]
    with pytest.raises(ValueError, match="trajectory: no floating-point tensors"):
        extra_merge(ints)


def test_mixed_float_dtypes_warn_naming_checkpoint_and_key():
    a, b = _ck(0), _ck(1)
    b["w"] = b["w"].to(torch.bfloat16)
    with pytest.warns(UserWarning, match=r"checkpoint 1: floating dtypes differ.*'w'.*bfloat16"):
        out = sma([a, b])
    assert out["w"].dtype == torch.float32  # checkpoint 0's dtype, as the warning says
    with pytest.warns(UserWarning, match=r"trajectory\[1\]: floating dtypes differ"):
        extra_merge([a, b], alpha=1.0)
    # same dtypes: no warning
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sma([_ck(0), _ck(1)])
