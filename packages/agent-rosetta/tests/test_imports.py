"""The public API, pinned: an accidental export or a dropped name fails here."""

import importlib

import icml26_agent_rosetta
import pytest

EXPECTED_ALL = [
    "ACTIONS",
    "AndSelector",
    "BackboneChange",
    "Backend",
    "CompositionPenalty",
    "Design",
    "GoBackToStep",
    "HPBackend",
    "IndexSelector",
    "LLMErrorPolicy",
    "LayerSelector",
    "NoisyPolicy",
    "NotSelector",
    "OrSelector",
    "ParseError",
    "ProtocolError",
    "ResidueNameSelector",
    "RosettaEnv",
    "RosettaScriptsBackend",
    "RotamerChange",
    "ScriptedPolicy",
    "StepRecord",
    "Task",
    "__version__",
    "action_docs",
    "compile_protocol",
    "hp_optimum",
    "hp_task",
    "fixed_backbone_task",
    "ideal_helix_ca",
    "kabsch_rmsd",
    "normalize_residue",
    "pack_ncaa_task",
    "pareto_front",
    "parse_protocol",
    "parse_reply",
    "resolve_selector",
    "run_episode",
    "tool_schemas",
    "validate_action",
]


def test_public_api_is_pinned():
    assert sorted(icml26_agent_rosetta.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert hasattr(icml26_agent_rosetta, name), name


@pytest.mark.parametrize(
    ("module", "extra", "name"),
    [
        ("icml26_agent_rosetta.openmm_backend", "openmm", "OpenMMBackend"),
        ("icml26_agent_rosetta.ncaa", "biotite", "resolve_residue"),
        ("icml26_agent_rosetta.mcp_server", "mcp", "build_server"),
        ("icml26_agent_rosetta.openai_policy", "openai", "OpenAIChatPolicy"),
    ],
)
def test_extras_live_in_submodules(module, extra, name):
    pytest.importorskip(extra)
    assert hasattr(importlib.import_module(module), name)
