"""The declared-neighbours protocol and the bounded real domains (Interval, Box)."""

from __future__ import annotations

import numpy as np
import pytest

import dpkit
from dpkit.plugin import Box, CategoricalDomain, Domain, Interval, VectorDomain


def test_interval_pairs_are_neighbours_in_both_orders_and_include_the_ends() -> None:
    domain = Interval(-1, 1)
    pairs = domain.pairs()
    assert (-1.0, 1.0) in pairs and (1.0, -1.0) in pairs
    assert all((b, a) in pairs for a, b in pairs)
    assert all(domain.contains([a, b]).all() and a != b for a, b in pairs)


def test_interval_random_neighbours_lie_inside() -> None:
    domain = Interval(2.5, 7)
    pairs = domain.neighbours(np.random.default_rng(1), 200)
    values = np.array(pairs)
    assert values.shape == (200, 2)
    assert domain.contains(values).all()
    # Drawn over the whole interval, not only near one point.
    assert values.min() < 3.0 and values.max() > 6.5


def test_interval_clip_and_contains() -> None:
    domain = Interval(0, 10)
    np.testing.assert_array_equal(domain.clip([-5, 3, 12]), [0, 3, 10])
    np.testing.assert_array_equal(domain.contains([-5, 3, np.nan, 10]), [False, True, False, True])
    assert np.isnan(domain.clip([np.nan])[0])


@pytest.mark.parametrize(
    ("low", "high", "field"),
    [
        (1, 1, "high"),
        (2, 1, "high"),
        (float("nan"), 1, "bound"),
        (0, float("inf"), "bound"),
        ("a", 1, "bound"),
    ],
)
def test_interval_bad_bounds_are_typed_errors(low: object, high: object, field: str) -> None:
    with pytest.raises(dpkit.InvalidParameter) as info:
        Interval(low, high)  # type: ignore[arg-type]
    assert info.value.parameter == field


def test_box_pairs_move_every_coordinate_and_one_coordinate() -> None:
    box = Box.cube(-1, 1, 3)
    assert box.dimension == 3
    pairs = box.pairs()
    moved = [int(np.sum(a != b)) for a, b in pairs]
    assert 3 in moved and 1 in moved
    assert all(box.contains(np.stack([a, b])).all() for a, b in pairs)
    random = box.neighbours(np.random.default_rng(0), 50)
    assert len(random) == 50 and all(np.shape(a) == (3,) for a, _ in random)
    assert all(box.contains(np.stack(pair)).all() for pair in random)


def test_box_of_different_intervals_clips_per_coordinate() -> None:
    box = Box((Interval(0, 1), Interval(-5, 5)))
    np.testing.assert_array_equal(box.clip([[2, -9], [0.5, 1]]), [[1, -5], [0.5, 1]])
    with pytest.raises(dpkit.InvalidParameter):
        Box(())
    with pytest.raises(dpkit.InvalidParameter):
        Box.cube(0, 1, 0)


def test_categorical_domain_declares_its_extremes() -> None:
    domain = CategoricalDomain(5)
    assert domain.declares_neighbours
    assert domain.pairs() == [(0, 4), (4, 0), (0, 1), (1, 0)]
    drawn = domain.neighbours(np.random.default_rng(3), 100)
    assert all(a != b and 0 <= a < 5 and 0 <= b < 5 for a, b in drawn)


def test_a_domain_without_declared_neighbours_says_so() -> None:
    class Opaque(Domain):
        pass

    assert not Opaque().declares_neighbours
    assert not VectorDomain(1.0).declares_neighbours
    with pytest.raises(NotImplementedError, match="Opaque does not declare"):
        Opaque().pairs()
