"""Fuzz of the Python API with bad calls: every call returns a valid result or a DPKitError.

The privacy boundary: a bad parameter, a bad array or a bad accounting event
must never surface as a numpy/Python exception (TypeError, ValueError, OverflowError,
ZeroDivisionError, MemoryError, ...) or as an inf/NaN answer. Hypothesis draws mechanism and
query names from the registry and parameters mixing valid, extreme and invalid values (wrong
types, NaN, ±inf, 1e308, 1e-320, negatives, strings, None, nested lists), arrays that are
ragged, of the wrong dtype, empty or 3-D, accounting events and event strings. The examples
are derandomized (reproducible in CI) and number well over 1000 in total.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpkit
from dpkit.accounting import (
    account,
    compose_advanced,
    compose_basic,
    compose_parallel,
    compose_pld,
    compose_rdp,
    compose_zcdp,
)
from dpkit.accounting._parse import parse_event
from dpkit.params import parameter_specs
from dpkit.privacy import (
    ApproximateDP,
    GaussianDP,
    LaplaceDP,
    PureDP,
    RandomizedResponseDP,
    SubsampledDP,
)

_REGISTRY = dpkit.get_registry()
_MECHANISMS = sorted(_REGISTRY.mechanisms)
_QUERIES = sorted(_REGISTRY.queries)
_SETTINGS = {
    "deadline": None,
    "derandomize": True,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.filter_too_much],
}

_EXTREME_FLOATS = [
    0.0,
    -0.0,
    -1.0,
    1e308,
    -1e308,
    1e-320,
    5e-324,
    710.0,
    1e-300,
    math.nan,
    math.inf,
    -math.inf,
    0.5,
    1.0,
    2.0,
]
_SCALARS = st.one_of(
    st.sampled_from(_EXTREME_FLOATS),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.none(),
    st.text(max_size=5),
    st.just(np.float64("nan")),
    st.just(np.int64(3)),
    st.just(1 + 2j),
)
_VALUES: st.SearchStrategy[Any] = st.recursive(
    _SCALARS, lambda inner: st.lists(inner, max_size=3), max_leaves=6
)


def _typical(spec: Any) -> Any:
    domain = type(spec.domain).__name__
    if spec.typical is not None:
        low, high = spec.typical
        return st.sampled_from([low, high, (low + high) / 2])
    if domain == "Choice":
        return st.sampled_from(spec.domain.options)
    if domain == "Boolean":
        return st.booleans()
    if domain == "Labels":
        return st.just(["a", "b", "c"])
    return st.sampled_from([0.5, 1e-5, 0.0, 10.0])


@st.composite
def _params(draw: st.DrawFn, cls: type) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for key, spec in parameter_specs(cls).items():
        choice = draw(st.integers(0, 3))
        if choice == 0:
            params[key] = draw(_VALUES)
        elif choice == 1 and not spec.optional:
            params[key] = draw(_typical(spec))
        elif choice == 2:
            params[key] = draw(st.sampled_from(_EXTREME_FLOATS))
    if draw(st.integers(0, 9)) == 0:
        params[draw(st.sampled_from(["bogus", "eps", "rng"]))] = draw(_VALUES)
    return params


def _kind_cls(kind: str, name: str) -> type:
    info = (_REGISTRY.mechanisms if kind == "mechanism" else _REGISTRY.queries)[name]
    return getattr(info, "cls", info)  # type: ignore[no-any-return]


def _construct(kind: str, name: str, params: dict[str, Any]) -> Any:
    if kind == "mechanism":
        return dpkit.mechanism(name, **params)
    return _REGISTRY.query(name, **params)


def _check_finite_privacy(obj: Any) -> None:
    privacy = obj.privacy
    assert math.isfinite(privacy.epsilon), (obj, privacy)
    assert 0 <= privacy.delta < 1, (obj, privacy)
    for attr in ("scale", "sigma", "p", "q"):
        value = getattr(obj, attr, None)
        if isinstance(value, float):
            assert math.isfinite(value), (obj, attr, value)
            if attr in ("scale", "sigma"):
                assert value > 0, (obj, attr, value)


@settings(max_examples=400, **_SETTINGS)
@given(data=st.data(), kind=st.sampled_from(["mechanism", "query"]))
def test_construction_is_typed_or_finite(data: st.DataObject, kind: str) -> None:
    names = _MECHANISMS if kind == "mechanism" else _QUERIES
    name = data.draw(st.sampled_from(names))
    params = data.draw(_params(_kind_cls(kind, name)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow warning is a bug too
        try:
            obj = _construct(kind, name, params)
            _check_finite_privacy(obj)
        except dpkit.DPKitError:
            pass


@settings(max_examples=100, **_SETTINGS)
@given(
    kind=st.sampled_from(["mechanism", "query"]),
    data=st.data(),
    value=st.sampled_from([1e308, 1e-320, 5e-324, 710.0, 1e300, 1e-300, 1e-13, 1e12, 1e-12]),
    key=st.sampled_from(["epsilon", "sensitivity", "delta", "lower", "upper"]),
)
def test_extreme_allowed_looking_numbers(
    kind: str, data: st.DataObject, value: float, key: str
) -> None:
    """ε = 1e308 or 1e-320, Δ = 1e308, ...: a typed error or a finite result, never inf/NaN."""
    names = _MECHANISMS if kind == "mechanism" else _QUERIES
    name = data.draw(st.sampled_from(names))
    cls = _kind_cls(kind, name)
    specs = parameter_specs(cls)
    params = {k: data.draw(_typical(s)) for k, s in specs.items() if not s.optional}
    if "lower" in specs:
        params.update(lower=0.0, upper=10.0)
    if name in ("gaussian",) or params.get("noise") == "gaussian":
        params["delta"] = 1e-5
    params[key] = value if key != "lower" else -value
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            obj = _construct(kind, name, params)
        except dpkit.DPKitError:
            return
        _check_finite_privacy(obj)


_ARRAYS = st.one_of(
    st.lists(_SCALARS, max_size=6),
    st.lists(st.lists(st.integers(-3, 5), max_size=3), max_size=3),  # possibly ragged
    st.sampled_from(
        [
            np.array([], dtype=float),
            np.zeros((2, 2, 2)),
            np.array([np.nan, 1.0]),
            np.array([np.inf, -np.inf]),
            np.array(["a", "b"]),
            np.array([0, 1, 2, 1, 0]),
            np.array([[0.0, 1.0, 2.0]]),
            np.array([True, False]),
            np.array([1 + 1j]),
            np.array([None, 1], dtype=object),
            np.array([0, 1], dtype=np.uint8),
            np.array([2**62, -(2**62)]),
            np.array([1e308, -1e308]),
        ]
    ),
)


def _valid_mechanism(name: str) -> Any:
    cls = _kind_cls("mechanism", name)
    params: dict[str, Any] = {}
    for key, spec in parameter_specs(cls).items():
        if spec.optional and key not in ("k", "epsilon"):
            continue
        if key == "k":
            params[key] = 4
        elif spec.typical is not None:
            params[key] = spec.typical[0]
        elif type(spec.domain).__name__ == "Choice":
            params[key] = spec.domain.options[0]
        elif type(spec.domain).__name__ == "Boolean":
            params[key] = False
        elif key == "delta":
            params[key] = 1e-5
    return dpkit.mechanism(name, **params)


def _finite_estimate(estimate: Any) -> None:
    for field in ("estimates", "variance"):
        if field == "variance" and not hasattr(estimate, field):
            continue  # a distribution estimate (EM/EMS) has no variance
        value = np.asarray(getattr(estimate, field), dtype=float)
        assert not np.isnan(value).any(), (field, value)


@settings(max_examples=250, **_SETTINGS)
@given(name=st.sampled_from(_MECHANISMS), values=_ARRAYS, reports=_ARRAYS)
def test_randomize_and_estimate_on_bad_arrays(name: str, values: Any, reports: Any) -> None:
    mechanism = _valid_mechanism(name)
    try:
        released = mechanism.randomize(values, rng=np.random.default_rng(0))
    except dpkit.DPKitError:
        released = None
    if released is not None and np.asarray(released).dtype.kind == "f":
        assert np.isfinite(np.asarray(released)).all(), (name, values, released)
    for given_reports in (released, reports):
        if given_reports is None:
            continue
        with contextlib.suppress(dpkit.DPKitError):
            _finite_estimate(dpkit.estimate(mechanism, given_reports))


_EVENTS = st.one_of(
    st.builds(PureDP, st.floats(0, 5)),
    st.builds(ApproximateDP, st.floats(0, 5), st.floats(0, 1e-3)),
    st.builds(LaplaceDP, st.floats(0.01, 5)),
    st.builds(RandomizedResponseDP, st.floats(0.01, 5), st.integers(2, 10)),
    st.builds(GaussianDP, st.floats(0.3, 50), st.just(1e-5)),
    st.builds(SubsampledDP, st.builds(GaussianDP, st.floats(0.5, 5), st.just(1e-5)), st.just(0.1)),
)
_EVENT_ITEMS = st.one_of(
    _EVENTS,
    st.tuples(_EVENTS, st.integers(0, 50)),
    st.tuples(_EVENTS, _SCALARS),
    _SCALARS,
    st.lists(_SCALARS, max_size=3),
)


@settings(max_examples=200, **_SETTINGS)
@given(
    events=st.one_of(st.lists(_EVENT_ITEMS, max_size=3), _SCALARS),
    delta=st.one_of(st.sampled_from([1e-5, 1e-10, 0.5]), _SCALARS),
    method=st.sampled_from(["best", "basic", "advanced", "zcdp", "rdp", "pld", "nope", None]),
)
def test_accounting_api(events: Any, delta: Any, method: Any) -> None:
    calls = [
        lambda: account(events, delta=delta, method=method),
        lambda: compose_basic(events),
        lambda: compose_parallel([events, events], delta=delta),
    ]
    backend = {
        "advanced": compose_advanced,
        "zcdp": compose_zcdp,
        "rdp": compose_rdp,
        "pld": compose_pld,
    }.get(method)
    if backend is not None:
        calls.append(lambda: backend(events, delta=delta))
    for call in calls:
        try:
            bound = call()
        except dpkit.DPKitError:
            continue
        assert not math.isnan(bound.epsilon) and bound.epsilon >= 0, bound
        assert not math.isnan(bound.delta), bound


_EVENT_TEXT = st.one_of(
    st.text(max_size=30),
    st.builds(
        lambda name, key, value, count: f"{name}({key}={value})*{count}",
        st.sampled_from(["gaussian", "laplace", "rr", "krr", "pure", "approx", "x"]),
        st.sampled_from(["epsilon", "delta", "k", "noise_multiplier", "sampling_rate", ""]),
        st.sampled_from(["1", "0", "-1", "1e308", "1e-320", "nan", "inf", "1e999", "0.5", "x"]),
        st.sampled_from(["1", "0", "100", "-1", "1.5", "99999999999999999999"]),
    ),
    st.sampled_from(
        [
            "approx(epsilon=1,delta=1e-7)*100",
            "krr(epsilon=1,k=1e308)*2",
            "krr(epsilon=1,k=2.5)",
            "approx(epsilon=1e308,delta=0.5)",
            "gaussian(noise_multiplier=1e-320)*3",
            "laplace(epsilon=1e308)*100000000000",
            "rr(epsilon=1,sampling_rate=2)",
        ]
    ),
)


@settings(max_examples=200, **_SETTINGS)
@given(texts=st.lists(_EVENT_TEXT, min_size=1, max_size=2), delta=st.sampled_from([1e-5, 0.1]))
def test_event_parser_and_accounting(texts: list[str], delta: float) -> None:
    """What ``dpkit account`` does with its EVENT arguments."""
    try:
        events = [parse_event(text, delta=delta) for text in texts]
        bound = account(events, delta=delta)
    except dpkit.DPKitError:
        return
    assert not math.isnan(bound.epsilon) and bound.epsilon >= 0, (texts, bound)


@settings(max_examples=60, **_SETTINGS)
@given(
    rng=st.one_of(
        st.integers(-(2**200), 2**200),
        st.floats(),
        st.booleans(),
        st.text(max_size=3),
        st.lists(st.integers(), max_size=2),
    )
)
def test_seeds_and_other_rng_values_are_typed_errors(rng: Any) -> None:
    """An int/float/bool 'seed' is never silently turned into a generator."""
    try:
        dpkit.plugin.resolve_rng(rng)
    except dpkit.InvalidParameter:
        return
    raise AssertionError(f"resolve_rng accepted {rng!r}")
