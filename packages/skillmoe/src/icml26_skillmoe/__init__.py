"""Skill-MoE (Symbolic-MoE): skill-based, gradient-free, instance-level expert selection
among pretrained LLMs, with a batch scheduler that loads each expert once (arXiv 2503.05641)."""

from .aggregate import (
    ANSWER_FORMATS,
    AggregatorItem,
    LLMAggregator,
    build_aggregator_benchmark,
    build_routed_aggregator_benchmark,
    expert_prompt,
    majority_vote,
    select_aggregator,
    synthesis_prompt,
)
from .backends import (
    FunctionGenerator,
    GenerationError,
    Generator,
    OpenAIChatGenerator,
    TransformersGenerator,
)
from .eval import (
    accuracy,
    extract_answer,
    extract_boxed,
    extract_choice,
    extract_number,
    math_equiv,
)
from .pipeline import SkillMoE, SkillMoEResult
from .profiles import ProfileBank, normalize_to_probability
from .routing import recruit, recruit_batch, recruitment_distribution
from .scheduler import BatchScheduler, ScheduleError, ScheduleStats, run_naive
from .serve import SkillMoEServer, make_server
from .skills import (
    KeywordMapper,
    LLMSkillAnnotator,
    filter_keywords,
    keyword_prompt,
    parse_keywords,
)

__version__ = "0.1.0"

__all__ = [
    "ANSWER_FORMATS",
    "AggregatorItem",
    "BatchScheduler",
    "FunctionGenerator",
    "GenerationError",
    "Generator",
    "KeywordMapper",
    "LLMAggregator",
    "LLMSkillAnnotator",
    "OpenAIChatGenerator",
    "ProfileBank",
    "ScheduleError",
    "ScheduleStats",
    "SkillMoE",
    "SkillMoEResult",
    "SkillMoEServer",
    "TransformersGenerator",
    "__version__",
    "accuracy",
    "build_aggregator_benchmark",
    "build_routed_aggregator_benchmark",
    "expert_prompt",
    "extract_answer",
    "extract_boxed",
    "extract_choice",
    "extract_number",
    "filter_keywords",
    "keyword_prompt",
    "majority_vote",
    "make_server",
    "math_equiv",
    "normalize_to_probability",
    "parse_keywords",
    "recruit",
    "recruit_batch",
    "recruitment_distribution",
    "run_naive",
    "select_aggregator",
    "synthesis_prompt",
]
