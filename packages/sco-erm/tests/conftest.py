import icml26_sco_erm as sco
import numpy as np
import pytest


@pytest.fixture(scope="session")
def code8():
    """A certified [48, 9] code (d = 6m for m = 8, distance >= 12)."""
    _G, C, dist = sco.good_code(48, 9, np.random.default_rng(0))
    return C, dist
