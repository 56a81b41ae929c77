"""The expected maximum of independent normals (simulator.order_stats): Tippett's table, copies, steps."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtr

from gnnplan.simulator.order_stats import expected_max

TIPPETT = {2: 1 / math.sqrt(math.pi), 3: 0.8462843753, 4: 1.0293753730, 8: 1.4236003060, 16: 1.7659913931,
           64: 2.3437334651}
"""Expected maximum of N standard normals (Tippett, Biometrika 17, 1925, Table I), to 10 digits: ``integral of
N x phi(x) Phi(x)^(N-1)`` by adaptive quadrature (scipy.integrate.quad, tolerance 1e-13)."""


@pytest.mark.parametrize("n", sorted(TIPPETT))
def test_identical_standard_normals_give_tippetts_values(n: int) -> None:
    assert expected_max([0.0] * n, [1.0] * n) == pytest.approx(TIPPETT[n], abs=1e-9)


def test_location_and_scale_carry_through() -> None:
    assert expected_max([3.0, 3.0], [0.5, 0.5]) == pytest.approx(3.0 + 0.5 / math.sqrt(math.pi), abs=1e-9)


def test_copies_count_as_identical_participants() -> None:
    assert expected_max([0.0], [1.0], [8]) == pytest.approx(TIPPETT[8], abs=1e-9)
    assert expected_max([0.0, 0.0], [1.0, 1.0], [4, 4]) == pytest.approx(TIPPETT[8], abs=1e-9)


def test_a_certain_participant_is_a_floor() -> None:
    # E[max(Z, c)] = c + phi(c) - c (1 - Phi(c)) (the normal's stop-loss transform)
    for c in (0.0, 0.7, 5.0):
        exact = c + math.exp(-c * c / 2) / math.sqrt(2 * math.pi) - c * (1 - float(ndtr(c)))
        assert expected_max([0.0, c], [1.0, 0.0]) == pytest.approx(exact, abs=1e-9)
    assert expected_max([1.0, 2.5], [0.0, 0.0]) == 2.5


def test_unequal_participants_match_a_seeded_monte_carlo() -> None:
    means, sds = np.array([0.1, 0.0, 0.3]), np.array([0.2, 0.5, 0.05])
    draws = (means + sds * np.random.default_rng(0).standard_normal((1_000_000, 3))).max(axis=1)
    assert expected_max(means, sds) == pytest.approx(draws.mean(), abs=4 * draws.std() / 1000)


@pytest.mark.parametrize(("means", "sds", "copies"), [([], [], None), ([0.0], [1.0, 1.0], None),
                                                      ([0.0], [-1.0], None), ([0.0], [math.inf], None),
                                                      ([0.0], [1.0], [0])])
def test_bad_input_raises(means: list[float], sds: list[float], copies: list[int] | None) -> None:
    with pytest.raises(ValueError, match="expected_max"):
        expected_max(means, sds, copies)
