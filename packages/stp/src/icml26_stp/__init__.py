"""icml26-stp: Semantic Tube Prediction (Huang, LeCun, Balestriero, 2026), a JEPA-style
hidden-trajectory regularizer for LLM fine-tuning. The TRL trainer is in `icml26_stp.trl`."""

from .loss import (
    LENGTH_ADJUSTMENTS,
    SAMPLERS,
    LinearPredictor,
    curvature_loss,
    sample_span,
    sample_spans,
    span_decompose,
    span_weight,
    stp_loss,
    stp_loss_ref,
    two_view_loss,
)
from .spans import message_spans, tokenize_messages

__version__ = "0.1.0"

__all__ = [
    "LENGTH_ADJUSTMENTS",
    "SAMPLERS",
    "LinearPredictor",
    "__version__",
    "curvature_loss",
    "message_spans",
    "sample_span",
    "sample_spans",
    "span_decompose",
    "span_weight",
    "stp_loss",
    "stp_loss_ref",
    "tokenize_messages",
    "two_view_loss",
]
