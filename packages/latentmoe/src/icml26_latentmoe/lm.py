"""A small byte-level language model and its training loop, to compare MoE feed-forward layers.

``ByteLM`` is a pre-norm decoder (causal ``scaled_dot_product_attention``, learned positions,
tied byte embedding) whose feed-forward block is built by a callable, so the same model runs
with a dense MLP, a top-k :class:`~icml26_latentmoe.MoE` or a
:class:`~icml26_latentmoe.MultiHeadLatentMoE`. :func:`train_byte_lm` trains it for a fixed
token budget with AdamW (linear warm-up, cosine decay) and the aux-loss-free balancer, and
reports validation bits per byte: bpb = mean cross-entropy (nats) / ln 2.

:func:`load_corpus` returns real English text that ships with CPython (``pydoc_data.topics``,
the help texts of the language reference), so nothing is downloaded.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pydoc_data.topics import topics

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .balancing import AuxFreeBalancer

__all__ = ["ByteLM", "TrainResult", "evaluate_bpb", "load_corpus", "train_byte_lm"]


def load_corpus(val_fraction: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """(train, val) uint8 arrays of the ``pydoc_data.topics`` texts (~465 kB), split by position."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1); got {val_fraction!r}")
    text = "\n\n".join(topics[key] for key in sorted(topics))
    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    cut = int(len(data) * (1 - val_fraction))
    return data[:cut].copy(), data[cut:].copy()


class _Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int, ffn: nn.Module) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model, bias=False)
        self.n_heads = n_heads
        self.ffn = ffn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.n_heads, D // self.n_heads).unbind(2)
        a = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, D))  # (B, T, D)
        return x + self.ffn(self.ln2(x))


class ByteLM(nn.Module):
    """Decoder-only LM over bytes (vocabulary 256) with a pluggable feed-forward block.

    Args:
        d_model, n_layers, n_heads (attention heads), seq_len: the usual sizes.
        make_ffn: called once per layer with the layer index; returns a module (..., d) -> (..., d).
    """

    def __init__(
        self,
        d_model: int,
        n_layers: int,
        n_heads: int,
        seq_len: int,
        make_ffn: Callable[[int], nn.Module],
    ) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model must be divisible by n_heads={n_heads}; got {d_model}")
        self.seq_len = seq_len
        self.embed = nn.Embedding(256, d_model)
        self.pos = nn.Parameter(torch.zeros(seq_len, d_model))
        blocks = [_Block(d_model, n_heads, make_ffn(i)) for i in range(n_layers)]
        self.blocks = nn.ModuleList(blocks)
        self.ln_f = nn.LayerNorm(d_model)
        nn.init.normal_(self.embed.weight, std=0.02)
        for blk in blocks:
            nn.init.normal_(blk.qkv.weight, std=0.02)
            nn.init.normal_(blk.proj.weight, std=0.02 / math.sqrt(2 * n_layers))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """(B, T) byte ids -> (B, T, 256) logits."""
        T = idx.shape[1]
        if T > self.seq_len:
            raise ValueError(f"sequence length must be <= seq_len={self.seq_len}; got {T}")
        x = self.embed(idx) + self.pos[:T]
        for blk in self.blocks:
            x = blk(x)
        return self.ln_f(x) @ self.embed.weight.T


def _batch(
    data: np.ndarray, batch: int, seq_len: int, gen: np.random.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    starts = gen.integers(0, len(data) - seq_len - 1, size=batch)
    chunk = np.stack([data[s : s + seq_len + 1] for s in starts]).astype(np.int64)
    t = torch.from_numpy(chunk)
    return t[:, :-1], t[:, 1:]


@torch.no_grad()
def evaluate_bpb(
    model: nn.Module, data: np.ndarray, seq_len: int, max_windows: int = 64, batch: int = 16
) -> float:
    """Bits per byte on consecutive non-overlapping windows of ``data`` (deterministic)."""
    was_training = model.training
    model.eval()
    n_win = min(max_windows, (len(data) - 1) // seq_len)
    if n_win < 1:
        raise ValueError(f"data must hold more than seq_len={seq_len} bytes; got {len(data)}")
    total, count = 0.0, 0
    for i in range(0, n_win, batch):
        rows = [
            data[j * seq_len : j * seq_len + seq_len + 1] for j in range(i, min(n_win, i + batch))
        ]
        t = torch.from_numpy(np.stack(rows).astype(np.int64))
        logits = model(t[:, :-1])
        total += F.cross_entropy(
            logits.reshape(-1, 256), t[:, 1:].reshape(-1), reduction="sum"
        ).item()
        count += t[:, 1:].numel()
    model.train(was_training)
    return total / count / math.log(2)


@dataclass
class TrainResult:
    val_bpb: float
    train_loss: float  # last step's cross-entropy, nats
    tokens: int  # training tokens seen
    seconds: float
    final_imbalance: float | None  # max/mean expert load at the last balancer step


def _stderr(line: str) -> None:
    """The default progress sink of :func:`train_byte_lm`: one line on standard error."""
    print(line, file=sys.stderr, flush=True)


def train_byte_lm(
    model: ByteLM,
    train: np.ndarray,
    val: np.ndarray,
    *,
    steps: int,
    batch_size: int = 8,
    lr: float = 3e-3,
    warmup: int = 20,
    bias_update_rate: float | None = 1e-3,
    seed: int = 0,
    eval_windows: int = 64,
    log: Callable[[str], None] | None = _stderr,
) -> TrainResult:
    """Train ``model`` (a :class:`ByteLM`) for ``steps`` batches of ``batch_size × seq_len`` bytes.

    Adds ``aux_loss`` of any layer that sets one (the Switch/z-loss baseline) to the task loss;
    runs :class:`AuxFreeBalancer` after each step when ``bias_update_rate`` is not None.
    Progress (step, loss, expert imbalance, elapsed seconds) goes to ``log`` at step 0, every 50
    steps and at the last one: standard error by default, ``log=print`` for stdout, ``log=None``
    for silence.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1; got {steps}")
    seq_len = model.seq_len
    gen = np.random.default_rng(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: (
            min(1.0, (s + 1) / warmup)
            * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, s / steps))))
        ),
    )
    balancer = AuxFreeBalancer(bias_update_rate) if bias_update_rate is not None else None
    model.train()
    t0 = time.perf_counter()
    imbalance = None
    loss = torch.tensor(float("nan"))
    for step in range(steps):
        x, y = _batch(train, batch_size, seq_len, gen)
        loss = F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1))
        aux = [
            a
            for m in model.modules()
            if isinstance(a := getattr(m, "aux_loss", None), torch.Tensor)
        ]
        total = loss + sum(aux) if aux else loss
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if balancer is not None:
            imbalance = balancer.step(model)
        if log is not None and (step % 50 == 0 or step == steps - 1):
            elapsed = time.perf_counter() - t0
            log(f"step {step:4d} loss {loss.item():.3f} imbalance {imbalance} {elapsed:.1f}s")
    seconds = time.perf_counter() - t0
    return TrainResult(
        val_bpb=evaluate_bpb(model, val, seq_len, max_windows=eval_windows),
        train_loss=loss.item(),
        tokens=steps * batch_size * seq_len,
        seconds=seconds,
        final_imbalance=imbalance,
    )
