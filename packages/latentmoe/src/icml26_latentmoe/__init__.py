"""Multi-Head LatentMoE and Head Parallel (arXiv 2602.04870), with a top-k MoE + EP baseline."""

from .balancing import AuxFreeBalancer
from .comm import (
    CommStats,
    count_comm,
    ep_bytes_formula,
    ep_bytes_from_routing,
    hp_bytes_formula,
)
from .head_parallel import check_equal_tokens, combine, dispatch
from .hf import replace_mlp
from .latentmoe import MultiHeadLatentMoE, mh_latent_moe_ref
from .lm import ByteLM, TrainResult, evaluate_bpb, load_corpus, train_byte_lm
from .moe import MoE, moe_ref
from .parallel import (
    all_reduce_grads,
    data_parallel,
    fully_shard_hp,
    head_local_names,
    hp_dp_groups,
    hp_dp_mesh,
    sync_head_local_grads,
)

__version__ = "0.1.0"

__all__ = [
    "AuxFreeBalancer",
    "ByteLM",
    "CommStats",
    "MoE",
    "MultiHeadLatentMoE",
    "TrainResult",
    "__version__",
    "all_reduce_grads",
    "check_equal_tokens",
    "combine",
    "count_comm",
    "data_parallel",
    "dispatch",
    "ep_bytes_formula",
    "ep_bytes_from_routing",
    "evaluate_bpb",
    "fully_shard_hp",
    "head_local_names",
    "hp_bytes_formula",
    "hp_dp_groups",
    "hp_dp_mesh",
    "load_corpus",
    "mh_latent_moe_ref",
    "moe_ref",
    "replace_mlp",
    "sync_head_local_grads",
    "train_byte_lm",
]
