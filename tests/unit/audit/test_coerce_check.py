"""``check_coerce`` fails a ``coerce`` that pulls neighbours apart, passes one that does not, and
``dp_check`` runs it.

Deterministic (exact arithmetic, derandomized Hypothesis; the audit inside ``dp_check`` runs at
check_mechanism's α = 1e-7, a false alarm ≤ 2e-7).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
import pytest

import dpkit
from dpkit.testing import check_coerce

pytest_plugins = ["pytester"]


@attrs.frozen
class Counted(dpkit.plugin.Mechanism):
    """Geometric noise on integer answers; ``coerce`` is one of :data:`MAPS`."""

    name: ClassVar[str] = "counted"
    kind: ClassVar[Literal["local", "central"]] = "central"
    coerce_with: str = "clamp"
    monotone: bool = False

    @property
    def domain(self) -> dpkit.plugin.VectorDomain:
        return dpkit.plugin.VectorDomain(2.0, norm=1.0, integer=True, monotone=self.monotone)

    @property
    def privacy(self) -> dpkit.PureDP:
        return dpkit.PureDP(epsilon=1.0)

    def coerce(self, values: Any, /, *, rng: Any = None) -> np.ndarray:
        return MAPS[self.coerce_with](np.asarray(values))

    def randomize(self, values: Any, /, *, rng: Any = None) -> np.ndarray:
        generator, _ = dpkit.plugin.resolve_rng(rng, owner=self.name)
        answers = np.asarray(values, dtype=np.int64)
        p = -math.expm1(-0.5)
        return (
            answers + generator.geometric(p, answers.shape) - generator.geometric(p, answers.shape)
        )


def _floats(values: np.ndarray) -> np.ndarray:
    floats = np.array([float(v) if v == v else 0.0 for v in values.ravel().tolist()])
    return np.clip(np.nan_to_num(floats), -1e15, 1e15).reshape(values.shape)


def _integers_only(values: np.ndarray) -> np.ndarray:
    """Integer dtypes clamped exactly (a non-expansive map); anything else to zeros."""
    if values.dtype.kind in "iub":
        return np.clip(values.astype(object), -(2**62), 2**62).astype(np.int64)
    return np.zeros(values.shape, dtype=np.int64)


MAPS = {
    "clamp": _integers_only,
    "round_half_even": lambda v: np.rint(_floats(v)).astype(np.int64),
    "double": lambda v: 2 * _integers_only(v),
    "flip_last": lambda v: (
        _integers_only(v) * np.where(np.arange(v.shape[-1]) == v.shape[-1] - 1, -1, 1)
    ),
}


def test_a_clamping_coerce_passes() -> None:
    # A non-integer array can never be neighbours of an integer one, so mapping it to zeros is
    # fine; integers are only clamped.
    check_coerce(Counted("clamp"))


def test_a_coerce_that_pulls_neighbours_apart_fails() -> None:
    with pytest.raises(AssertionError, match="not non-expansive"):
        check_coerce(Counted("double"))


def test_a_coerce_that_breaks_one_direction_fails_a_monotone_domain() -> None:
    check_coerce(Counted("flip_last"))  # negating a coordinate keeps every L1 distance
    with pytest.raises(AssertionError, match="one direction"):
        check_coerce(Counted("flip_last", monotone=True))


@attrs.frozen
class Dropping(dpkit.plugin.Mechanism):
    """A local mechanism whose ``coerce`` drops the records outside its domain."""

    name: ClassVar[str] = "dropping"
    kind: ClassVar[Literal["local", "central"]] = "local"

    @property
    def domain(self) -> dpkit.plugin.CategoricalDomain:
        return dpkit.plugin.CategoricalDomain(2)

    @property
    def privacy(self) -> dpkit.PureDP:
        return dpkit.PureDP(epsilon=1.0)

    def coerce(self, values: Any, /, *, rng: Any = None) -> np.ndarray:
        array = np.asarray(values)
        keep = [v in (0, 1) and not isinstance(v, str) for v in array.tolist()]
        return np.asarray(array[np.asarray(keep, dtype=bool)], dtype=np.int64)

    def randomize(self, values: Any, /, *, rng: Any = None) -> np.ndarray:
        return np.asarray(values, dtype=np.int64)


def test_a_local_coerce_must_keep_one_output_per_record() -> None:
    with pytest.raises(AssertionError, match="records into"):
        check_coerce(Dropping())


def test_dp_check_runs_the_coerce_check(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_rounding=f"""
import sys
sys.path.insert(0, {str(__import__("pathlib").Path(__file__).parent)!r})
from test_coerce_check import Counted

def test_rounding(dp_check):
    dp_check(Counted("round_half_even"))
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--dpkit-samples", "5000")
    result.assert_outcomes(failed=1)  # rounding half to even: 0.5 and 1.5 become 0 and 2
    result.stdout.fnmatch_lines(["*not non-expansive*"])
