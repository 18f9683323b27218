"""Every registered mechanism and estimator takes the arrays of other libraries and gives back
the caller's type, with the law of the numpy path: for neighbouring inputs drawn from each
mechanism's declared domain (worst cases included), in hostile layouts — a torch tensor
(contiguous, or a strided view into a larger one, in a narrower dtype) and an array-api-strict
array — ``randomize`` on one key is bit for bit ``randomize`` of the numpy array on the same key
(secure mode), and on one seed (fast mode: a torch ``Generator`` is turned into a numpy one),
and ``log_probability`` and ``accumulate`` agree with numpy.

False-positive rate: 0. Keyed and seeded draws are deterministic, the comparisons exact, and
Hypothesis is derandomized.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from support import jax_arrays  # noqa: E402

import dpkit  # noqa: E402
from dpkit import SecureRandom  # noqa: E402
from dpkit.testing.inputs import Unsupported, plan_inputs  # noqa: E402
from dpkit.testing.strategies import mechanisms, neighbouring_pairs  # noqa: E402

REGISTRY = dpkit.load_registry()
NAMES = REGISTRY.names()
KEY = bytes(range(7, 39))
LAYOUTS = ("torch", "torch strided", "torch narrow", "array-api-strict", *jax_arrays.LAYOUTS)


def _plain(value: Any) -> np.ndarray[Any, Any]:
    if isinstance(value, torch.Tensor):
        return value.numpy()
    if jax_arrays.is_jax(value):
        return jax_arrays.to_numpy(value)
    return np.from_dlpack(value) if hasattr(value, "__dlpack__") else np.asarray(value)


def _spelled(batch: np.ndarray[Any, Any], layout: str) -> Any:
    if layout == "torch":
        return torch.from_numpy(batch.copy())
    if layout == "torch strided":  # every other row of a tensor twice as long
        wide = torch.from_numpy(np.repeat(batch, 2, axis=0).copy())
        return wide[::2]
    if layout == "torch narrow":  # the narrowest dtype that holds the values
        narrow = batch.astype(np.int32) if batch.dtype.kind in "iu" else batch.astype(np.float32)
        return (
            torch.from_numpy(narrow) if np.array_equal(narrow, batch) else torch.from_numpy(batch)
        )
    if layout == "jax":
        return jax_arrays.asarray(batch)
    return xs.asarray(batch)


def _numpy_twin(batch: np.ndarray[Any, Any], spelled: Any) -> np.ndarray[Any, Any]:
    """The numpy array the spelled input stands for (a narrowed dtype included)."""
    return np.ascontiguousarray(_plain(spelled)) if spelled is not None else batch


def _same_output(got: Any, expected: Any, library_type: type) -> None:
    if isinstance(expected, np.ndarray) and expected.dtype != object:
        assert isinstance(got, library_type), f"{type(got).__name__} is not the caller's type"
        assert np.array_equal(_plain(got), expected, equal_nan=True)
    elif isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected)
        for item, twin in zip(got, expected, strict=True):
            _same_output(item, twin, library_type)


def _equal(a: Any, b: Any) -> bool:
    """Field by field (statistics hold numpy arrays, which ``==`` does not reduce)."""
    if attrs.has(type(a)):
        return type(a) is type(b) and all(
            _equal(getattr(a, f.name), getattr(b, f.name)) for f in attrs.fields(type(a))
        )
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
    return bool(a == b)


def _numpy_statistics(mechanism: Any, reports: Any) -> Any:
    """What the mechanism's estimator accumulates from numpy reports, or None where it has no
    estimator or takes its reports as another object (a graph's adjacency reports)."""
    if mechanism.kind != "local" or not isinstance(reports, np.ndarray):
        return None
    try:
        return REGISTRY.estimator(mechanism).accumulate(reports)
    except dpkit.errors.DPKitError:
        return None


def _plan(mechanism: Any) -> Any:
    try:
        return plan_inputs(mechanism, rng=np.random.default_rng(0))
    except Unsupported:
        return None


@pytest.mark.parametrize("name", NAMES)
@settings(
    max_examples=8,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data(), layout=st.sampled_from(LAYOUTS), mode=st.sampled_from(["secure", "fast"]))
def test_other_libraries_arrays_in_the_callers_type_out(
    name: str, data: st.DataObject, layout: str, mode: str
) -> None:
    mechanism = data.draw(mechanisms(REGISTRY.info(name).cls))
    plan = _plan(mechanism)
    if plan is None:
        pytest.skip(f"{name}: the auditor has no input plan for it")
    x, x_other = data.draw(neighbouring_pairs(mechanism, plan))
    for value in (x, x_other):
        batch = plan.batch(value, 9)
        if batch.dtype.kind not in "biuf":
            continue  # strings and other objects have no tensor form
        spelled = _spelled(batch, layout)
        twin = _numpy_twin(batch, spelled)
        library_type = type(spelled)
        if mode == "secure":
            got = mechanism.randomize(spelled, rng=SecureRandom.from_key(KEY))
            expected = mechanism.randomize(twin, rng=SecureRandom.from_key(KEY))
        else:
            got = mechanism.randomize(spelled, rng=np.random.default_rng(5))
            expected = mechanism.randomize(twin, rng=np.random.default_rng(5))
        _same_output(got, expected, library_type)
        if mechanism.has_exact_distribution and isinstance(expected, np.ndarray):
            outputs = (
                _spelled(np.asarray(expected), "torch") if layout != "array-api-strict" else None
            )
            if outputs is not None and expected.dtype != object:
                log_p = mechanism.log_probability(outputs, spelled)
                assert np.array_equal(
                    _plain(log_p), mechanism.log_probability(expected, twin), equal_nan=True
                )
        statistics = _numpy_statistics(mechanism, expected)
        if statistics is not None:
            reports = _spelled(np.ascontiguousarray(expected), "torch")
            assert _equal(REGISTRY.estimator(mechanism).accumulate(reports), statistics)
