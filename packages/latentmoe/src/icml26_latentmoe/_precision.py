"""Keep the router and its bias in fp32 when a module is cast to half precision."""

from __future__ import annotations

import torch
from torch import nn


class KeepRouterFP32(nn.Module):
    """Mixin: after ``.to(dtype)``, ``.half()``, ``.bfloat16()``, the attributes named in
    ``FP32`` are fp32 again, restored from their values *before* the cast (no rounding).

    The paper's router is fp32; in bf16 a 1e-3 bias update is lost on half of a bias of
    magnitude ~1 (bf16 has an 8-bit mantissa). fp64 is left alone (gradchecks).
    """

    FP32: tuple[str, ...] = ()

    def _apply(self, fn, recurse=True):
        keep = {n: getattr(self, n).detach() for n in self.FP32}  # the pre-cast storage
        out = super()._apply(fn, recurse)
        for name, old in keep.items():
            new = getattr(self, name)
            if new.dtype in (torch.float16, torch.bfloat16) and old.dtype != new.dtype:
                fixed = old.to(device=new.device, dtype=torch.float32)
                if isinstance(new, nn.Parameter):
                    new.data = fixed
                else:
                    setattr(self, name, fixed)  # a registered buffer: replaced in _buffers
        return out


def recomputing() -> bool:
    """True while autograd runs a backward pass, e.g. when activation checkpointing replays a
    forward: load statistics must not be counted a second time then.

    Under ``torch.compile`` the forward is traced once and never replayed by Python, so this is
    False there (the graph-task id is a Python int that dynamo cannot put in a graph).
    """
    if torch.compiler.is_compiling():
        return False
    return torch._C._current_graph_task_id() != -1
