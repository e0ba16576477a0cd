"""RC-FCL: retrospective calibration for asynchronous concept drift in federated continual learning."""

from .aggregation import (
    RoundResult,
    aggregation_weights,
    drift_weighted_average,
    robust_drift_average,
    validate_update,
)
from .drift import (
    ClassConditionalDriftDetector,
    DriftReport,
    LogisticDiscriminator,
    auc,
    auc_null_pvalue,
    discriminator_weights,
)
from .generative import ConditionalVAE, CVAEConfig
from .rcfcl import (
    METHODS,
    RCFCLConfig,
    SimulationResult,
    detection_scores,
    init_params,
    local_update,
    simulate,
)
from .scenarios import AsyncDriftScenario, StreamDriftScenario, load_digits_xy

__version__ = "0.1.0"

__all__ = [
    "METHODS",
    "AsyncDriftScenario",
    "CVAEConfig",
    "ClassConditionalDriftDetector",
    "ConditionalVAE",
    "DriftReport",
    "LogisticDiscriminator",
    "RCFCLConfig",
    "RoundResult",
    "SimulationResult",
    "StreamDriftScenario",
    "__version__",
    "aggregation_weights",
    "auc",
    "auc_null_pvalue",
    "detection_scores",
    "discriminator_weights",
    "drift_weighted_average",
    "init_params",
    "load_digits_xy",
    "local_update",
    "robust_drift_average",
    "simulate",
    "validate_update",
]
