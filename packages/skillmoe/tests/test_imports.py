import icml26_skillmoe

EXPECTED_ALL = [
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


def test_public_api_is_pinned():
    assert sorted(icml26_skillmoe.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert hasattr(icml26_skillmoe, name), name
