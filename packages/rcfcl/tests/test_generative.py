"""The conditional generator's samples are recognised as their class by a trained classifier."""

import numpy as np
import pytest
import torch
from icml26_rcfcl import ConditionalVAE, CVAEConfig, load_digits_xy


def test_generated_samples_are_classified_as_their_label():
    torch.set_num_threads(1)
    sk = pytest.importorskip("sklearn.discriminant_analysis")
    x, y = load_digits_xy()
    clf = sk.LinearDiscriminantAnalysis().fit(x, y)  # an independent classifier of real digits
    torch.manual_seed(0)
    gen = ConditionalVAE(CVAEConfig()).fit(x, y, epochs=10, seed=0)
    labels = np.repeat(np.arange(10), 50)
    xs = gen.sample(labels, generator=torch.Generator().manual_seed(1)).clamp(0, 1).numpy()
    acc = (clf.predict(xs) == labels).mean()
    assert acc > 0.85, acc  # ignoring the label would give about 0.1
    per_class = [(clf.predict(xs[labels == c]) == c).mean() for c in range(10)]
    assert min(per_class) > 0.5, per_class


def test_sample_shapes_and_bad_labels():
    gen = ConditionalVAE(CVAEConfig(x_dim=4, n_classes=3, hidden=8, z_dim=2))
    assert gen.sample(2, 5).shape == (5, 4)
    assert gen.sample(np.array([0, 1, 2])).shape == (3, 4)
    with pytest.raises(ValueError, match=r"y: labels must lie in \[0, 3\)"):
        gen.sample(np.array([0, 3]))
    with pytest.raises(ValueError, match="x: expected shape"):
        gen.fit(np.zeros((5, 3)), np.zeros(5, int))
    with pytest.raises(ValueError, match="x: contains NaN"):
        gen.fit(np.full((5, 4), np.nan), np.zeros(5, int))
