"""icml26-agent-rosetta: a structured environment for LLM agents that operate Rosetta.

Two-phase actions with schema-checked arguments, compiled to RosettaScripts, run as an
ensemble per step, Pareto selection and concise summaries (Teneggi et al., 2026).
Backends that need an extra live in submodules: ``icml26_agent_rosetta.openmm_backend``
(``[openmm]``), ``.mcp_server`` (``[mcp]``), ``.openai_policy`` (``[openai]``).
"""

from .actions import (
    ACTIONS,
    AndSelector,
    BackboneChange,
    CompositionPenalty,
    GoBackToStep,
    IndexSelector,
    LayerSelector,
    NotSelector,
    OrSelector,
    ResidueNameSelector,
    RotamerChange,
    normalize_residue,
    resolve_selector,
)
from .agent import NoisyPolicy, ScriptedPolicy, run_episode
from .compile import ProtocolError, compile_protocol, parse_protocol
from .env import Backend, RosettaEnv, StepRecord, Task, action_docs, tool_schemas
from .error_model import LLMErrorPolicy
from .hp import HPBackend, hp_optimum, hp_task
from .metrics import Design, ideal_helix_ca, kabsch_rmsd, pareto_front
from .parser import ParseError, parse_reply, validate_action
from .rosetta_backend import RosettaScriptsBackend
from .tasks import fixed_backbone_task, pack_ncaa_task

__version__ = "0.1.0"

__all__ = [
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
    "fixed_backbone_task",
    "hp_optimum",
    "hp_task",
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
