"""Memory and speed of the MoS output layer: entity-sliced fused path vs the one-shot paths.

Peers (same run, same inputs, forward + backward of the mean NLL of one answer per query):

* ``naive``: the probability-space MoS of the language-modelling reference
  (``log(Σ_k π_k softmax(z_k) + 1e-8)``), what a user would write first;
* ``reference``: :func:`mos_log_probs_ref` (log space, autograd);
* ``sliced``: :func:`mos_log_probs_sliced` (custom autograd, recomputes logits per slice).

Memory is the bytes autograd saves for backward (``saved_tensors_hooks``; tensors counted once
by storage), which is what grows with B·K·|E|; speed is a ratio against ``reference``
measured in the same run (CPU here, no absolute GPU times). Prints one JSON line.
``--device cuda`` runs the same measurement on a GPU (tools/gpu_check.py does).
"""

# gpu-check: --device cuda  # the full-size run (B=256, K=8, d=64, |E|=100k) on the GPU

from __future__ import annotations

import argparse
import json
import sys
import time


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--quick", action="store_true", help="smaller sizes (|E| = 20 000), 3 repeats")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    return p


if __name__ == "__main__":
    _parser().parse_args()  # --help and bad options exit here, before the imports below

import torch
from icml26_kge_mos import mos_log_probs_ref, mos_log_probs_sliced


def naive(log_pi, g, ent):
    probs = torch.softmax(g @ ent.T, -1)  # (B, K, N)
    return torch.log((log_pi.exp().unsqueeze(-1) * probs).sum(1) + 1e-8)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(fn, inputs, target, repeats):
    saved = {}

    def pack(t):
        saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    leaves = [x.detach().clone().requires_grad_() for x in inputs]
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*leaves)
    loss = -out.gather(1, target[:, None]).mean()
    loss.backward()
    mem = sum(saved.values())
    times = []
    for _ in range(repeats):
        leaves = [x.detach().clone().requires_grad_() for x in inputs]
        _sync(target.device)
        t0 = time.perf_counter()
        loss = -fn(*leaves).gather(1, target[:, None]).mean()
        loss.backward()
        _sync(target.device)
        times.append(time.perf_counter() - t0)
    return mem, sorted(times)[len(times) // 2]


def main() -> None:
    a = _parser().parse_args()
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        _parser().error("--device cuda: no CUDA device is available")
    torch.set_num_threads(2)
    b, k, d, n = (128, 4, 32, 20_000) if a.quick else (256, 8, 64, 100_000)
    chunk = 2048
    gen = torch.Generator().manual_seed(0)
    log_pi = torch.log_softmax(torch.randn(b, k, generator=gen), -1)
    g = torch.tanh(torch.randn(b, k, d, generator=gen))
    ent = torch.randn(n, d, generator=gen)
    target = torch.randint(0, n, (b,), generator=gen)
    log_pi, g, ent, target = (t.to(dev) for t in (log_pi, g, ent, target))
    reps = 3 if a.quick else 5
    res = {
        "naive": measure(naive, (log_pi, g, ent), target, reps),
        "reference": measure(mos_log_probs_ref, (log_pi, g, ent), target, reps),
        "sliced": measure(
            lambda x, y, z: mos_log_probs_sliced(x, y, z, chunk), (log_pi, g, ent), target, reps
        ),
    }
    for name, (mem, sec) in res.items():
        print(
            f"{name:9s} saved-for-backward {mem / 2**20:8.1f} MiB   fwd+bwd {sec * 1e3:8.1f} ms",
            file=sys.stderr,
        )
    print(
        json.dumps(
            {
                "package": "kge-mos",
                "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
                "bench": f"MoS output B={b} K={k} d={d} |E|={n}, chunk {chunk}: saved-for-backward memory and fwd+bwd time",
                "sliced_mem_mib": round(res["sliced"][0] / 2**20, 2),
                "reference_mem_mib": round(res["reference"][0] / 2**20, 2),
                "naive_mem_mib": round(res["naive"][0] / 2**20, 2),
                "mem_ratio_reference_over_sliced": round(res["reference"][0] / res["sliced"][0], 2),
                "time_ratio_sliced_over_reference": round(
                    res["sliced"][1] / res["reference"][1], 2
                ),
                "time_ratio_naive_over_reference": round(res["naive"][1] / res["reference"][1], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
