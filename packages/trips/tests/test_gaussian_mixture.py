"""Seeded mixture draws are the same on every supported torch (issue 66, nox lowest).

``torch.multinomial(p, 1, generator=g)`` goes through ``Tensor.exponential_``, which on CPU
took one number from ``g`` (an MKL seed) up to torch 2.6 and takes one per category from 2.7:
the category is valid either way, but ``g`` is left elsewhere, so every later draw of a
seeded run moved and the README toy printed sliced-W2 1.55 at torch 2.4 against 0.29 at 2.15.
``categorical`` draws with ``torch.rand`` only.
"""

import math

import pytest
import torch
from icml26_trips import GaussianMixturePrior
from icml26_trips.gaussian_mixture import MixturePosterior, categorical

D = torch.float64
EPS = torch.finfo(D).eps


def readme_prior_and_generator():
    """The README quickstart's first draws: the prior, then ``A`` from the same generator."""
    g = torch.Generator().manual_seed(0)
    prior = GaussianMixturePrior(
        torch.randn(4, 6, generator=g, dtype=D) * 2,
        torch.full((4,), 0.4, dtype=D),
        torch.ones(4, dtype=D),
        labels=torch.tensor([0, 0, 1, 1]),
    )
    torch.randn(2, 6, generator=g, dtype=D)  # A
    return prior, g


def old_multinomial(probs, n, replacement=False, *, generator=None, out=None):
    """torch <= 2.6 on CPU: a single draw takes ONE number from the generator (MKL's seed)."""
    assert out is None and replacement
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    q = torch.empty(probs.shape, dtype=probs.dtype).exponential_(
        generator=torch.Generator().manual_seed(seed)
    )
    return (probs / q).argmax().reshape(1) if n == 1 else torch.multinomial(probs, n, True)


def test_readme_instance_is_pinned():
    """x_true of the README toy as the locked torch (2.15) drew it; torch.multinomial at 2.4
    gave the same component but [-3.93, -0.80, -2.46, ...] (the noise came 3 numbers earlier)."""
    prior, g = readme_prior_and_generator()
    x = prior.sample(1, cond=0, generator=g)[0]
    expected = torch.tensor(
        [
            -5.223019468839622,
            -1.0108947316377088,
            -1.592352688092539,
            2.0138644314262506,
            -1.8820137301518376,
            -2.6044705575791687,
        ],
        dtype=D,
    )
    torch.testing.assert_close(x, expected, rtol=64 * EPS, atol=0.0)


def test_draws_do_not_depend_on_how_multinomial_uses_the_generator(monkeypatch):
    """Replaying the torch <= 2.6 multinomial leaves every seeded draw where it was."""
    prior, _ = readme_prior_and_generator()
    post = MixturePosterior(
        torch.tensor([0.2, 0.0, 0.8], dtype=D),
        prior.means[:3],
        torch.eye(6, dtype=D).expand(3, 6, 6),
    )

    def draws():
        g = torch.Generator().manual_seed(3)
        return [
            prior.sample(1, cond=0, generator=g),
            prior.sample(1, generator=g),
            post.sample(1, g),
            prior.sample(5, cond=1, generator=g),
            post.sample(7, g),
            torch.rand(4, generator=g, dtype=D),  # where the generator was left
        ]

    now = draws()
    monkeypatch.setattr(torch, "multinomial", old_multinomial)
    for a, b in zip(now, draws()):
        assert torch.equal(a, b)


def test_single_draw_is_the_exponential_race_on_one_uniform_per_category():
    p = torch.tensor([0.1, 0.0, 0.6, 0.3], dtype=D)
    for seed in range(20):
        g, ref = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        k = categorical(p, 1, g)
        u = torch.rand(4, generator=ref, dtype=D)
        assert k.shape == (1,) and int(k) == int((p / -torch.log1p(-u)).argmax())
        assert torch.equal(torch.rand(3, generator=g), torch.rand(3, generator=ref))


def test_many_draws_are_the_inverse_cdf_of_one_uniform_each():
    p = torch.tensor([0.1, 0.0, 0.6, 0.3], dtype=D)
    g, ref = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    k = categorical(p, 50, g)
    u = torch.rand(50, generator=ref, dtype=D)
    expected = (u[:, None] >= torch.tensor([0.1, 0.1, 0.7], dtype=D)).sum(1)
    assert torch.equal(k, expected)
    assert torch.equal(torch.rand(3, generator=g), torch.rand(3, generator=ref))


def test_matches_torch_multinomial_where_torch_has_not_changed():
    """n > 1: the with-replacement kernel (same on 2.4 and 2.15); n = 1: torch >= 2.7."""
    p = torch.softmax(torch.tensor([0.3, -1.0, 2.0, 0.0, -math.inf], dtype=D), 0)
    new_exponential = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2]) >= (
        2,
        7,
    )
    for seed in range(10):
        for n in (1, 9) if new_exponential else (9,):
            g, ref = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
            assert torch.equal(categorical(p, n, g), torch.multinomial(p, n, True, generator=ref))
            assert torch.equal(torch.rand(2, generator=g), torch.rand(2, generator=ref))


@pytest.mark.parametrize("n", [1, 4000])
def test_frequencies_follow_the_probabilities(n):
    p = torch.tensor([0.1, 0.0, 0.6, 0.3, 0.0], dtype=D)
    g = torch.Generator().manual_seed(0)
    total = 40_000
    k = torch.cat([categorical(p * 7.0, n, g) for _ in range(total // n)])  # unnormalised
    freq = torch.bincount(k, minlength=5).to(D) / total
    assert freq[1] == 0 and freq[4] == 0  # zero-probability categories are never drawn
    tol = 5 * torch.sqrt(p * (1 - p) / total)  # 5 binomial standard errors
    assert bool(((freq - p).abs() <= tol).all()), freq


def test_categorical_rejects_bad_arguments():
    with pytest.raises(ValueError, match="probs"):
        categorical(torch.ones(2, 2, dtype=D), 1)
    with pytest.raises(ValueError, match="probs"):
        categorical(torch.tensor([0.5, -0.1], dtype=D), 1)
    with pytest.raises(ValueError, match="probs"):
        categorical(torch.zeros(3, dtype=D), 1)
    with pytest.raises(ValueError, match="n must"):
        categorical(torch.ones(3, dtype=D), 0)
