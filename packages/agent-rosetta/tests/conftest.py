import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent

sys.path.insert(0, str(HERE))  # tests/golden_actions.py, shared by the test modules


@pytest.fixture(scope="session")
def openmm_backend():
    pytest.importorskip("openmm")
    pytest.importorskip("pdbfixer")
    from icml26_agent_rosetta.openmm_backend import OpenMMBackend

    return OpenMMBackend(max_iterations=100, candidates=1, max_trials=1)


def pytest_report_header(config):
    return f"python {sys.version.split()[0]}"
