"""Representations of (prompt, response) samples for attribution: hidden states and gradients.

* ``tokenize_pairs``: right-padded ``input_ids`` / ``attention_mask`` plus a ``response_mask``
  marking the response tokens (the part whose unsafety matters and whose loss is trained).
* ``extract_hidden_states``: one vector per sample from any ``transformers`` causal LM (any
  module whose output has ``hidden_states`` under ``output_hidden_states=True``): a layer, mean
  or last-token pooling, over the response tokens only or the whole sequence.
* ``per_sample_grads``: the gradient of each sample's loss (mean next-token cross-entropy over
  its response tokens by default) w.r.t. all parameters, LoRA parameters only, or a chosen set;
  optionally projected by ``RandomProjector`` (Rademacher or sparse JL), computed one sample at a
  time (memory O(chunk_size x P) for the chunk of flat gradients before projection: use
  ``chunk_size=1`` or LoRA parameters on large models) and streamed into a disk-backed ``.npy``
  (``numpy.lib.format.open_memmap``) when ``out`` is a path.

* ``extract_token_states``: the same hidden states unpooled, one (T_i, D) array per sample,
  for token-level denoising (``TokenDRA``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

__all__ = [
    "RandomProjector",
    "causal_lm_response_loss",
    "extract_hidden_states",
    "extract_token_states",
    "per_sample_grads",
    "select_parameters",
    "tokenize_pairs",
]

Batch = Mapping[str, torch.Tensor]


def tokenize_pairs(
    tokenizer: Any,
    prompts: Sequence[str] | None,
    responses: Sequence[str],
    *,
    max_length: int = 256,
    add_eos: bool = True,
) -> dict[str, torch.Tensor]:
    """Right-padded batch of prompt + response token ids with a response mask.

    ``tokenizer(text, add_special_tokens=False)["input_ids"]`` encodes each part; the response
    gets the tokenizer's EOS appended when ``add_eos``. Truncation keeps the first
    ``max_length`` tokens. ``prompts=None`` treats each text as a response.

    Returns ``input_ids`` (N, T), ``attention_mask`` (N, T), ``response_mask`` (N, T).
    """
    if prompts is not None and len(prompts) != len(responses):
        raise ValueError(
            f"prompts ({len(prompts)}) and responses ({len(responses)}) differ in length"
        )
    if len(responses) == 0:
        raise ValueError("responses is empty")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    eos = tokenizer.eos_token_id
    rows, masks = [], []
    for i, resp in enumerate(responses):
        p = (
            []
            if prompts is None
            else list(tokenizer(prompts[i], add_special_tokens=False)["input_ids"])
        )
        r = list(tokenizer(resp, add_special_tokens=False)["input_ids"])
        if add_eos and eos is not None:
            r.append(eos)
        ids = (p + r)[:max_length]
        rm = ([0] * len(p) + [1] * len(r))[:max_length]
        rows.append(ids)
        masks.append(rm)
    t = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), t), pad, dtype=torch.long)
    attention = torch.zeros((len(rows), t), dtype=torch.long)
    response = torch.zeros((len(rows), t), dtype=torch.long)
    for i, (ids, rm) in enumerate(zip(rows, masks)):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        attention[i, : len(ids)] = 1
        response[i, : len(rm)] = torch.tensor(rm)
    return {"input_ids": input_ids, "attention_mask": attention, "response_mask": response}


def _check_batch(batch: Batch) -> int:
    for key in ("input_ids", "attention_mask"):
        if key not in batch:
            raise ValueError(f"batch must contain {key!r} (see tokenize_pairs)")
    n = int(batch["input_ids"].shape[0])
    if n == 0:
        raise ValueError("batch is empty")
    return n


def _open_out(out: str | os.PathLike[str] | None, shape: tuple[int, int]) -> np.ndarray:
    if out is None:
        return np.zeros(shape, dtype=np.float32)
    return np.lib.format.open_memmap(os.fspath(out), mode="w+", dtype=np.float32, shape=shape)


@torch.no_grad()
def extract_hidden_states(
    model: torch.nn.Module,
    batch: Batch,
    *,
    layer: int = -1,
    pool: str = "mean",
    response_only: bool = True,
    batch_size: int = 32,
    out: str | os.PathLike[str] | None = None,
) -> np.ndarray:
    """Pooled hidden states, (N, D) float32 (a ``.npy`` memmap when ``out`` is a path).

    ``hidden_states[layer]`` of the model's output (index 0 is the embedding output, -1 the last
    layer), pooled over the response tokens (``response_only``) or all attended tokens:
    ``pool="mean"`` averages them, ``pool="last"`` takes the last one.
    """
    if pool not in ("mean", "last"):
        raise ValueError(f"pool must be 'mean' or 'last'; got {pool!r}")
    n = _check_batch(batch)
    if response_only and "response_mask" not in batch:
        raise ValueError("response_only=True needs batch['response_mask'] (see tokenize_pairs)")
    model_was_training = model.training
    model.eval()
    result: np.ndarray | None = None
    device = next(model.parameters()).device
    try:
        for lo in range(0, n, batch_size):
            ids = batch["input_ids"][lo : lo + batch_size].to(device)  # (B, T)
            att = batch["attention_mask"][lo : lo + batch_size].to(device)  # (B, T)
            mask = (
                att
                if not response_only
                else att * batch["response_mask"][lo : lo + batch_size].to(device)
            )
            if bool((mask.sum(dim=1) == 0).any()):
                bad = lo + int(torch.nonzero(mask.sum(dim=1) == 0)[0, 0])
                raise ValueError(f"sample {bad} has no tokens to pool (empty response?)")
            hs = model(input_ids=ids, attention_mask=att, output_hidden_states=True).hidden_states
            h = hs[layer].float()  # (B, T, D)
            m = mask.to(h.dtype)  # (B, T)
            if pool == "mean":
                v = (h * m[..., None]).sum(dim=1) / m.sum(dim=1, keepdim=True)  # (B, D)
            else:
                last = (m * torch.arange(m.shape[1], device=device)).argmax(dim=1)  # (B,)
                v = h[torch.arange(h.shape[0], device=device), last]
            if result is None:
                result = _open_out(out, (n, v.shape[1]))
            result[lo : lo + v.shape[0]] = v.cpu().numpy()
    finally:
        model.train(model_was_training)
    assert result is not None
    if isinstance(result, np.memmap):
        result.flush()
    return result


@torch.no_grad()
def extract_token_states(
    model: torch.nn.Module,
    batch: Batch,
    *,
    layer: int = -1,
    response_only: bool = True,
    batch_size: int = 32,
) -> list[np.ndarray]:
    """Unpooled hidden states: one (T_i, D) float32 array per sample, its response tokens
    (``response_only``) or all attended tokens, in order (input of ``TokenDRA``)."""
    n = _check_batch(batch)
    if response_only and "response_mask" not in batch:
        raise ValueError("response_only=True needs batch['response_mask'] (see tokenize_pairs)")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out: list[np.ndarray] = []
    try:
        for lo in range(0, n, batch_size):
            ids = batch["input_ids"][lo : lo + batch_size].to(device)  # (B, T)
            att = batch["attention_mask"][lo : lo + batch_size].to(device)  # (B, T)
            mask = att if not response_only else att * batch["response_mask"][lo : lo + batch_size]
            hs = model(input_ids=ids, attention_mask=att, output_hidden_states=True).hidden_states
            h = hs[layer].float().cpu().numpy()  # (B, T, D)
            for i in range(h.shape[0]):
                keep = mask[i].bool().cpu().numpy()
                if not keep.any():
                    raise ValueError(f"sample {lo + i} has no tokens (empty response?)")
                out.append(h[i, keep])
    finally:
        model.train(was_training)
    return out


def causal_lm_response_loss(model: torch.nn.Module, sample: Batch) -> torch.Tensor:
    """Mean next-token cross-entropy over the response tokens of one sample (batch of 1).

    Position j predicts token j+1; token j+1 counts when it is attended and (if the sample has a
    ``response_mask``) a response token.
    """
    ids, att = sample["input_ids"], sample["attention_mask"]  # (1, T)
    logits = model(input_ids=ids, attention_mask=att).logits  # (1, T, V)
    keep = att[:, 1:].bool()
    if "response_mask" in sample:
        keep = keep & sample["response_mask"][:, 1:].bool()
    if not bool(keep.any()):
        raise ValueError("a sample has no response tokens to take the loss on")
    nll = torch.nn.functional.cross_entropy(
        logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten(), reduction="none"
    )  # (T-1,)
    return nll[keep.flatten()].mean()


def select_parameters(
    model: torch.nn.Module, params: str | Sequence[str] | Callable[[str], bool] = "all"
) -> list[tuple[str, torch.nn.Parameter]]:
    """Named parameters to differentiate: ``"all"`` trainable ones, ``"lora"`` (names containing
    ``lora_``, as in peft), a list of names, or a predicate on the name."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if params == "all":
        chosen = named
    elif params == "lora":
        chosen = [(n, p) for n, p in named if "lora_" in n]
    elif callable(params):
        chosen = [(n, p) for n, p in named if params(n)]
    elif isinstance(params, str):
        raise ValueError(
            f"params must be 'all', 'lora', a list of names or a predicate; got {params!r}"
        )
    else:
        wanted = set(params)
        chosen = [(n, p) for n, p in named if n in wanted]
        missing = wanted - {n for n, _ in chosen}
        if missing:
            raise ValueError(
                f"params names not among the model's trainable parameters: {sorted(missing)[:5]}"
            )
    if not chosen:
        raise ValueError(f"params={params!r} selects no trainable parameter")
    return chosen


class RandomProjector:
    """Random projection R^p -> R^k that preserves inner products in expectation (JL).

    ``kind="rademacher"``: P x = R^T x / sqrt(k) with R_ij = +-1 (equiprobable).
    ``kind="sjlt"``: sparse JL (Kane and Nelson 2014): each input coordinate j is added to ``s``
    output buckets h_1(j)..h_s(j) with random signs, scaled by 1 / sqrt(s); cost O(s p) per
    vector instead of O(k p).

    The matrix is never materialised: it is regenerated block by block (``block`` input
    coordinates at a time) from ``seed`` and the block index, so memory is O(block x k) and the
    same seed gives the same projection in every call and process.
    """

    def __init__(
        self,
        dim_in: int,
        dim_out: int,
        *,
        kind: str = "rademacher",
        seed: int = 0,
        s: int = 4,
        block: int = 8192,
    ) -> None:
        if kind not in ("rademacher", "sjlt"):
            raise ValueError(f"kind must be 'rademacher' or 'sjlt'; got {kind!r}")
        if dim_in < 1 or dim_out < 1:
            raise ValueError(f"dim_in and dim_out must be positive; got {dim_in}, {dim_out}")
        if kind == "sjlt" and not 1 <= s <= dim_out:
            raise ValueError(f"s must lie in [1, dim_out]; got {s}")
        self.dim_in, self.dim_out, self.kind = dim_in, dim_out, kind
        self.seed, self.s, self.block = seed, s, block

    def _gen(self, b: int) -> torch.Generator:
        return torch.Generator().manual_seed(self.seed * 1_000_003 + b)

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """(B, dim_in) -> (B, dim_out), float32."""
        if x.ndim != 2 or x.shape[1] != self.dim_in:
            raise ValueError(f"x must be (B, {self.dim_in}); got {tuple(x.shape)}")
        x = x.float()
        out = torch.zeros(x.shape[0], self.dim_out, dtype=torch.float32, device=x.device)
        for b, lo in enumerate(range(0, self.dim_in, self.block)):
            xb = x[:, lo : lo + self.block]  # (B, p_b)
            p_b, g = xb.shape[1], self._gen(b)
            if self.kind == "rademacher":
                r = torch.randint(0, 2, (p_b, self.dim_out), generator=g).float() * 2 - 1
                out += xb @ r.to(x.device)  # (B, k)
            else:
                rows = torch.randint(0, self.dim_out, (p_b, self.s), generator=g)  # h_l(j)
                sign = torch.randint(0, 2, (p_b, self.s), generator=g).float() * 2 - 1
                for j in range(self.s):
                    out.index_add_(1, rows[:, j].to(x.device), xb * sign[:, j].to(x.device))
        scale = math.sqrt(self.dim_out) if self.kind == "rademacher" else math.sqrt(self.s)
        return out / scale

    __call__ = project


def per_sample_grads(
    model: torch.nn.Module,
    batch: Batch,
    *,
    params: str | Sequence[str] | Callable[[str], bool] = "all",
    loss_fn: Callable[[torch.nn.Module, Batch], torch.Tensor] = causal_lm_response_loss,
    projector: RandomProjector | None = None,
    precondition: torch.Tensor | None = None,
    chunk_size: int = 32,
    out: str | os.PathLike[str] | None = None,
) -> np.ndarray:
    """Per-sample gradients g_i = d loss(x_i) / d theta, (N, P) or projected (N, k) float32.

    One backward pass per sample (exact for any model; dropout is disabled via ``model.eval()``),
    flattened in ``named_parameters`` order, gathered ``chunk_size`` at a time, projected, and
    written to ``out`` (a ``.npy`` memmap) when given. ``batch`` holds tensors whose first dim is
    the sample; ``loss_fn(model, sample)`` gets each sample as a batch of one.
    ``precondition`` (P,) multiplies each flat gradient before the projection, e.g. LESS's Adam
    preconditioner 1 / (sqrt(v_hat) + eps) for training gradients.
    """
    n = int(next(iter(batch.values())).shape[0])
    if n == 0:
        raise ValueError("batch is empty")
    chosen = select_parameters(model, params)
    tensors = [p for _, p in chosen]
    p_total = sum(p.numel() for p in tensors)
    if projector is not None and projector.dim_in != p_total:
        raise ValueError(
            f"projector.dim_in={projector.dim_in} but the selected parameters have {p_total} entries"
        )
    if precondition is not None and tuple(precondition.shape) != (p_total,):
        raise ValueError(
            f"precondition must have shape ({p_total},); got {tuple(precondition.shape)}"
        )
    k = p_total if projector is None else projector.dim_out
    result = _open_out(out, (n, k))
    device = tensors[0].device
    was_training = model.training
    model.eval()
    try:
        for lo in range(0, n, chunk_size):
            hi = min(lo + chunk_size, n)
            g = torch.empty(hi - lo, p_total, dtype=torch.float32, device=device)  # (C, P)
            for i in range(lo, hi):
                sample = {key: v[i : i + 1].to(device) for key, v in batch.items()}
                loss = loss_fn(model, sample)
                grads = torch.autograd.grad(loss, tensors, allow_unused=True)
                g[i - lo] = torch.cat(
                    [
                        (gr if gr is not None else torch.zeros_like(p)).reshape(-1).float()
                        for gr, p in zip(grads, tensors)
                    ]
                )
            if not bool(torch.isfinite(g).all()):
                raise FloatingPointError(f"non-finite gradient among samples {lo}..{hi - 1}")
            if precondition is not None:
                g = g * precondition.to(device=device, dtype=g.dtype)
            if projector is not None:
                g = projector(g)
            result[lo:hi] = g.detach().cpu().numpy()
    finally:
        model.train(was_training)
    if isinstance(result, np.memmap):
        result.flush()
    return result
