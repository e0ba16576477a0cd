"""Multi-Head LatentMoE and Head Parallel (arXiv 2602.04870), with a top-k MoE + EP baseline."""

from .balancing import AuxFreeBalancer
from .comm import (
    CommStats,
    count_comm,
    ep_bytes_formula,
    ep_bytes_from_routing,
    hp_bytes_formula,
)
from .head_parallel import combine, dispatch
from .hf import replace_mlp
from .latentmoe import MultiHeadLatentMoE, mh_latent_moe_ref
from .lm import ByteLM, TrainResult, evaluate_bpb, load_corpus, train_byte_lm
from .moe import MoE, moe_ref

__version__ = "0.1.0"

__all__ = [
    "AuxFreeBalancer",
    "ByteLM",
    "CommStats",
    "MoE",
    "MultiHeadLatentMoE",
    "TrainResult",
    "__version__",
    "combine",
    "count_comm",
    "dispatch",
    "ep_bytes_formula",
    "ep_bytes_from_routing",
    "evaluate_bpb",
    "hp_bytes_formula",
    "load_corpus",
    "mh_latent_moe_ref",
    "moe_ref",
    "replace_mlp",
    "train_byte_lm",
]
