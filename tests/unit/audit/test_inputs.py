"""Neighbouring inputs drawn for the auditor respect each declared relation, worst cases included.

Deterministic (fixed seeds, no statistical threshold).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpkit
from dpkit.testing import parameter_points
from dpkit.testing.inputs import Unsupported, plan_inputs, random_pairs, worst_case_pairs
from dpkit.testing.strategies import mechanisms, neighbouring_pairs, parameters


@attrs.frozen
class Selector(dpkit.plugin.Mechanism):
    """A vector-input mechanism (argmax of noisy utilities) over a configurable domain."""

    name: ClassVar[str] = "test_selector"
    kind: ClassVar[Literal["local", "central"]] = "central"
    norm: float = math.inf
    monotone: bool = False
    sensitivity: float = 2.0

    @property
    def domain(self) -> dpkit.plugin.VectorDomain:
        return dpkit.plugin.VectorDomain(self.sensitivity, norm=self.norm, monotone=self.monotone)

    @property
    def privacy(self) -> dpkit.PureDP:
        return dpkit.PureDP(epsilon=1.0)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> Any:
        u = np.asarray(values, float)
        if u.ndim != 2:
            raise ValueError("rows of utilities")
        return np.argmax(u + rng.gumbel(size=u.shape), axis=1)


def _distance(a: Any, b: Any, norm: float) -> float:
    return float(
        np.linalg.norm(np.atleast_1d(np.asarray(a, float) - np.asarray(b, float)), ord=norm)
    )


@pytest.mark.parametrize("norm", [1.0, 2.0, math.inf])
@pytest.mark.parametrize("monotone", [False, True])
def test_vector_pairs_are_neighbours(norm: float, monotone: bool) -> None:
    mechanism = Selector(norm=norm, monotone=monotone)
    plan = plan_inputs(mechanism, rng=np.random.default_rng(1))
    assert plan.mode == "vector"
    pairs = worst_case_pairs(mechanism, plan) + random_pairs(
        mechanism, plan, 50, rng=np.random.default_rng(2)
    )
    for a, b in pairs:
        assert 0 < _distance(a, b, norm) <= 2.0 + 1e-12
        move = np.asarray(b) - np.asarray(a)
        if monotone:
            assert np.all(move >= 0) or np.all(move <= 0)
    if norm == math.inf and not monotone:  # the x-shape pair is there
        assert any(
            np.any(np.asarray(b) - a > 0) and np.any(np.asarray(b) - a < 0) for a, b in pairs
        )


def test_scalar_and_categorical_pairs() -> None:
    laplace = dpkit.mechanism("laplace", epsilon=1.0, sensitivity=3.0)
    plan = plan_inputs(laplace, rng=np.random.default_rng(0))
    assert plan.mode == "scalar"
    assert (0.0, 3.0) in worst_case_pairs(laplace, plan)
    for a, b in random_pairs(laplace, plan, 50, rng=np.random.default_rng(3)):
        assert 0 < abs(a - b) <= 3.0
    krr = dpkit.mechanism("krr", epsilon=1.0, k=5)
    plan = plan_inputs(krr, rng=np.random.default_rng(0))
    assert set(worst_case_pairs(krr, plan)) == {(0, 4), (4, 0), (0, 1), (1, 0)}
    for a, b in random_pairs(krr, plan, 50, rng=np.random.default_rng(4)):
        assert a != b and 0 <= a < 5 and 0 <= b < 5


def test_a_randomizer_without_batch_support_is_unsupported() -> None:
    @attrs.frozen
    class OneAtATime(Selector):
        def randomize(self, values: Any, /, *, rng: np.random.Generator) -> Any:
            return int(np.argmax(np.asarray(values, float)))  # one selection, whatever the shape

    with pytest.raises(Unsupported, match="one output per row"):
        plan_inputs(OneAtATime(), rng=np.random.default_rng(0))


def test_parameter_points_span_typical_ranges() -> None:
    points = parameter_points(dpkit.get_registry().info("krr").cls)
    assert points[0] == {"epsilon": 0.05, "k": 2}
    assert points[-1] == {"epsilon": 6.0, "k": 64}


@settings(max_examples=20, derandomize=True, database=None)
@given(data=st.data())
def test_strategies_draw_within_the_declared_ranges(data: st.DataObject) -> None:
    cls = dpkit.get_registry().info("krr").cls
    params = data.draw(parameters(cls))
    assert 0.05 <= params["epsilon"] <= 6.0 and 2 <= params["k"] <= 64
    mechanism = data.draw(mechanisms(cls))
    a, b = data.draw(neighbouring_pairs(mechanism))
    assert a != b and min(a, b) >= 0 and max(a, b) < mechanism.domain.size
