"""icml26-sco-erm: best-case ERM overfits in SCO with d linear in m (Burla & Livni, ICML 2026)."""

from .bounds import (
    code_dimension,
    gd_lower_bound,
    gd_stability_bound,
    gd_upper_bound,
    gv_rate,
    overfit_erm_probability,
    paper_dimension,
    paper_lambda,
)
from .codes import (
    codeword_vectors,
    codewords,
    good_code,
    min_distance,
    min_distance_bruteforce,
    random_linear_code,
)
from .instances import FeldmanInstance, Sample
from .solvers import (
    Certificate,
    ERMResult,
    duality_gap,
    erm_exact,
    erm_smoothed,
    lower_bound,
    projected_gd,
    sgd_learner,
)

__version__ = "0.1.0"

__all__ = [
    "Certificate",
    "ERMResult",
    "FeldmanInstance",
    "Sample",
    "__version__",
    "code_dimension",
    "codeword_vectors",
    "codewords",
    "duality_gap",
    "erm_exact",
    "erm_smoothed",
    "gd_lower_bound",
    "gd_stability_bound",
    "gd_upper_bound",
    "good_code",
    "gv_rate",
    "lower_bound",
    "min_distance",
    "min_distance_bruteforce",
    "overfit_erm_probability",
    "paper_dimension",
    "paper_lambda",
    "projected_gd",
    "random_linear_code",
    "sgd_learner",
]
