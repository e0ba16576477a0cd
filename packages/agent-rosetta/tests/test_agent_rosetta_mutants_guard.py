"""Issue 67: properties the mutation list needs that no other test states."""

import numpy as np
import pytest
from icml26_agent_rosetta.tasks import radius_of_gyration


def test_radius_of_gyration_is_the_root_mean_square_not_the_mean_distance():
    """Rg = sqrt(mean |x_i - x̄|²): CAs at x = 0, 0, 0, 4 have centroid 1 and distances 1, 1, 1,
    3, so Rg = sqrt(12 / 4) = sqrt(3), not the mean distance 1.5 (they differ unless every
    point is equally far from the centroid)."""
    ca = np.array([[0.0, 0, 0], [0, 0, 0], [0, 0, 0], [4, 0, 0]])
    assert radius_of_gyration(ca) == pytest.approx(np.sqrt(3.0), rel=1e-12)
