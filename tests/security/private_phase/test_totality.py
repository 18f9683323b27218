"""The private phase is total (``docs/security.md``, "The privacy boundary").

For every registered mechanism and query — built-in or third-party, read from the registry at
collection time — adversarial inputs (NaN, ±inf, ±1e308, labels outside the domain, text and
None in object arrays, empty arrays, a single record) go through the public check and then,
when it accepts them, through ``coerce`` + ``randomize`` (mechanisms) or ``run`` (queries) in
fast and secure mode, with every warning an error: nothing may raise or warn, and a numeric
release is finite. The public check must decide from the structure alone: it gives the same
answer for an array of the same shape and dtype holding harmless values.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import pytest
from dpkit_central import Count, Histogram, Laplace, Mean, Quantile, Sum
from dpkit_central._validation import LATTICE_LIMIT, MAX_FINITE, lattice_steps
from dpkit_central.gaussian import Gaussian

import dpkit
from dpkit.params import parameter_specs
from dpkit.testing import parameter_points

pytestmark = pytest.mark.filterwarnings("error")

REGISTRY = dpkit.get_registry()
MECHANISMS = REGISTRY.names()
QUERY_NAMES = sorted(REGISTRY.queries)
SECRET = "SECRET-VALUE-7731"


def _object(*items: Any) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


class _Hostile(Exception):
    """Raised by the conversions of the hostile values below."""


class _HostileText(str):
    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        raise _Hostile

    def __str__(self) -> str:
        raise _Hostile

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        raise _Hostile


class _HostileBytes(bytes):
    def __bytes__(self) -> bytes:
        raise _Hostile

    def decode(self, *args: Any, **kwargs: Any) -> str:
        raise _Hostile


class _HostileInt(int):
    def __int__(self) -> int:
        raise _Hostile

    def __index__(self) -> int:
        raise _Hostile

    def __str__(self) -> str:
        raise _Hostile

    def __lt__(self, other: object) -> bool:
        raise _Hostile


ADVERSARIAL: dict[str, Any] = {
    "floats": np.array([np.nan, np.inf, -np.inf, 1e308, -1e308, 1.5, 0.0, 1.0, 2.0]),
    "all_nan": np.array([np.nan, np.nan]),
    "all_inf": np.array([np.inf, np.inf, np.inf]),
    "ints": np.array([0, 1, -1, 99, 2**40, np.iinfo(np.int64).max]),
    "uint64": np.array([0, 2**64 - 1], dtype=np.uint64),
    "int_matrix": np.array([[0, -5, 7], [np.iinfo(np.int64).min, np.iinfo(np.int64).max, 1]]),
    "empty_ints": np.array([], dtype=np.int64),
    "object": _object(1, "x", None, 2.5, float("nan"), 10**400, True, [1, 2], SECRET),
    # An int whose decimal text CPython refuses (over 4300 digits), conversions that raise, an
    # unhashable record, and numpy's variable-width text.
    "hostile_objects": _object(
        10**5000, -(10**5000), _HostileText("x"), _HostileBytes(b"x"), _HostileInt(3), {}, SECRET
    ),
    "string_dtype": np.array(["bus", SECRET, ""], dtype=np.dtypes.StringDType()),
    "labels": np.array(["bus", "car", SECRET]),
    "bools": np.array([True, False, True]),
    "empty": np.array([]),
    "single": np.array([1.0]),
    "single_nan": np.array([np.nan]),
    "matrix": np.array([[np.nan, np.inf, -np.inf, 3.0], [-np.inf, -np.inf, -np.inf, -np.inf]]),
    "matrix_huge": np.array([[1e308, -1e308, 5e-324], [np.inf, np.inf, np.inf]]),
    "scalar": np.array(np.nan),
}
MODES: dict[str, Callable[[], Any]] = {
    "fast": lambda: np.random.default_rng(0),
    "secure": lambda: None,  # dpkit.plugin.resolve_rng: the process-wide SecureRandom
}


def _typical(cls: type[dpkit.plugin.Mechanism]) -> dpkit.plugin.Mechanism:
    points = parameter_points(cls)
    return cls(**points[len(points) // 2])


def _mechanisms(name: str) -> list[dpkit.plugin.Mechanism]:
    cls = REGISTRY.info(name).cls
    found = [_typical(cls)]
    if name == "krr":
        found.append(cls(epsilon=1.0, categories=("bus", "bike", "car")))  # type: ignore[call-arg]
    return found


def _harmless(array: np.ndarray) -> np.ndarray:
    """Same shape and dtype, other values: what a structural check must not tell apart."""
    if array.dtype == object:
        out = np.empty(array.shape, dtype=object)
        out[...] = 0
        return out
    return np.zeros_like(array)


def _accepted(check: Any, data: np.ndarray) -> bool:
    """Whether the public check accepts ``data``; it must decide from the structure alone."""
    try:
        check(data)
    except dpkit.InvalidData:
        with pytest.raises(dpkit.InvalidData):
            check(_harmless(data))
        return False
    check(_harmless(data))
    return True


def _assert_finite(value: Any) -> None:
    array = np.asarray(value)
    if array.dtype.kind in "biuf":
        assert np.all(np.isfinite(array.astype(np.float64))), value


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("name", MECHANISMS)
def test_mechanisms_are_total_after_coerce(name: str, mode: str) -> None:
    _check_total(name, mode)


def _vector_length(domain: dpkit.plugin.Domain) -> int | None:
    """d for a domain whose inputs are vectors of d values (a Box, or a domain that declares
    vector pairs, such as one user's neighbour list), else None."""
    if isinstance(domain, dpkit.plugin.Box):
        return domain.dimension
    if domain.declares_neighbours and not isinstance(domain, dpkit.plugin.CategoricalDomain):
        first = np.asarray(domain.pairs()[0][0])
        return int(first.shape[0]) if first.ndim == 1 else None
    return None


def _adversarial(mechanism: dpkit.plugin.Mechanism) -> dict[str, Any]:
    """The adversarial inputs, as rows of d equal values for a mechanism on vectors (a Box, a
    neighbour list): the same bad values, in the shape its public check accepts."""
    d = _vector_length(mechanism.domain)
    if d is None:
        return ADVERSARIAL
    return {
        label: np.repeat(data.reshape(-1, 1), d, axis=1) if data.ndim == 1 else data
        for label, data in ADVERSARIAL.items()
    }


def _check_total(name: str, mode: str) -> None:
    accepted = 0
    for mechanism in _mechanisms(name):
        for label, data in _adversarial(mechanism).items():
            if not _accepted(mechanism.check_input, data):
                continue
            releases = mechanism.releases(data)
            assert isinstance(releases, int) and releases >= 0, (name, label)
            rng = MODES[mode]()
            generator = dpkit.plugin.resolve_rng(rng)[0]
            coerced = mechanism.coerce(np.asarray(data), rng=generator)
            out = mechanism.randomize(coerced, rng=cast(Any, generator))
            _assert_finite(out)
            accepted += 1
            if mechanism.kind == "local":
                assert np.asarray(out).shape[0] == data.shape[0], (name, label)
    assert accepted >= 5, f"{name}: the public check refused almost every adversarial input"


def _query_params(name: str) -> list[dict[str, Any]]:
    bounds = {"lower": -5.0, "upper": 10.0}
    known: dict[str, list[dict[str, Any]]] = {
        "count": [{}, {"nan": "keep"}, {"noise": "laplace"}, {"noise": "gaussian", "delta": 1e-6}],
        "sum": [bounds, {**bounds, "noise": "gaussian", "delta": 1e-6}],
        "mean": [bounds, {**bounds, "noise": "gaussian", "delta": 1e-6}],
        "quantile": [{**bounds, "q": 0.5}, {"lower": -1e100, "upper": 1e100, "q": 0.9}],
        "histogram": [
            {"categories": (1, "bus", 3)},
            {"categories": ("bus", "car"), "other": True, "noise": "laplace"},
            {"categories": (0, 1, 2), "noise": "gaussian", "delta": 1e-6},
        ],
    }
    if name in known:
        return [{"epsilon": 1.0, **params} for params in known[name]]
    # A third-party query: its declared defaults and the middle of its typical ranges.
    params: dict[str, Any] = {}
    for field, spec in parameter_specs(REGISTRY.query_info(name).cls).items():
        if spec.typical is not None:
            low, high = spec.typical
            params[field] = math.sqrt(low * high) if low > 0 < high else (low + high) / 2
    return [params]


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("name", QUERY_NAMES)
def test_queries_run_totally(name: str, mode: str) -> None:
    for params in _query_params(name):
        query = REGISTRY.query(name, **params)  # a third party's typical parameters must build
        check = getattr(query, "check_input", lambda data: None)
        for label, data in ADVERSARIAL.items():
            if not _accepted(check, data):
                continue
            if hasattr(query, "releases"):
                assert query.releases(data) == 1
            result = query.run(data, rng=MODES[mode]())
            _assert_finite(result.value)
            assert SECRET not in repr(result), (name, label)


# --- specific behaviour ---------------------------------------------------------------------


HUGE_EPSILON = 1e9


def test_histogram_drops_or_counts_outside_values_and_never_names_them() -> None:
    data = _object("bus", SECRET, "car", 3, [SECRET], None, float("nan"), "bus")
    dropped = Histogram(categories=("bus", "car", 3), epsilon=HUGE_EPSILON)
    np.testing.assert_array_equal(dropped.counts(data), [2, 1, 1])
    other = Histogram(categories=("bus", "car", 3), epsilon=HUGE_EPSILON, other=True)
    np.testing.assert_array_equal(other.counts(data), [2, 1, 1, 2])  # SECRET and [SECRET]
    result = other.run(data, rng=np.random.default_rng(0))
    assert result.categories == ("bus", "car", 3, "<other>")
    assert SECRET not in repr(result)
    with pytest.raises(dpkit.InvalidParameter, match="<other>"):
        Histogram(categories=("a", "<other>"), epsilon=1.0, other=True)


def test_histogram_matches_python_values_across_types() -> None:
    query = Histogram(categories=(1, 2, "x"), epsilon=HUGE_EPSILON)
    np.testing.assert_array_equal(query.counts(np.array([1.0, 2.0, 2.5, np.nan])), [1, 1, 0])
    np.testing.assert_array_equal(query.counts(np.array(["1", "x"])), [0, 0, 1])  # text ≠ int
    np.testing.assert_array_equal(query.counts(_object(np.int64(2), "x", 1, b"x")), [1, 1, 1])


def test_count_nan_policies() -> None:
    data = _object(1, None, float("nan"), "a", np.nan)
    rng = np.random.default_rng(1)
    assert Count(epsilon=HUGE_EPSILON).run(data, rng=rng).value == 2
    assert Count(epsilon=HUGE_EPSILON, nan="drop").run(data, rng=rng).value == 2
    assert Count(epsilon=HUGE_EPSILON, nan="keep").run(data, rng=rng).value == 5
    assert Count(epsilon=HUGE_EPSILON, nan="keep").run(np.array([np.nan]), rng=rng).value == 1


@pytest.mark.parametrize(
    "make",
    [
        lambda nan: Count(epsilon=1.0, nan=nan),
        lambda nan: Sum(lower=0.0, upper=1.0, epsilon=1.0, nan=nan),
        lambda nan: Mean(lower=0.0, upper=1.0, epsilon=1.0, nan=nan),
        lambda nan: Histogram(categories=("a",), epsilon=1.0, nan=nan),
        lambda nan: Quantile(q=0.5, lower=0.0, upper=1.0, epsilon=1.0, nan=nan),
    ],
)
def test_legacy_nan_error_is_refused_at_construction(make: Any) -> None:
    with pytest.raises(dpkit.InvalidParameter, match="nan must be one of 'drop'"):
        make("error")


def test_numeric_queries_treat_text_in_object_arrays_as_missing() -> None:
    data = _object(1.0, "7", None, 3, np.inf, True)
    rng = np.random.default_rng(2)
    total = Sum(lower=0.0, upper=10.0, epsilon=HUGE_EPSILON).run(data, rng=rng)
    assert total.value == pytest.approx(1 + 3 + 10 + 1, abs=1e-6)
    mean = Mean(lower=0.0, upper=10.0, epsilon=HUGE_EPSILON).run(data, rng=rng)
    assert mean.parts[1].value == pytest.approx(4.0, abs=1e-6)


def test_query_public_checks_name_structure_not_values() -> None:
    query: Any
    for query in (
        Sum(lower=0.0, upper=1.0, epsilon=1.0),
        Mean(lower=0.0, upper=1.0, epsilon=1.0),
        Quantile(q=0.5, lower=0.0, upper=1.0, epsilon=1.0),
    ):
        with pytest.raises(dpkit.InvalidData, match="text") as info:
            query.check_input(np.array([SECRET]))
        assert SECRET not in str(info.value) and "<U" not in str(info.value)
    for query in (Count(epsilon=1.0), Histogram(categories=("a",), epsilon=1.0)):
        query.check_input(np.array([SECRET]))  # any record type is counted
        assert query.releases(np.array([SECRET])) == 1
        with pytest.raises(dpkit.InvalidData) as info:
            query.check_input([[SECRET, 1], [2]])  # ragged
        assert SECRET not in str(info.value)
        with pytest.raises(dpkit.InvalidData, match="1-D"):
            query.check_input(np.zeros((2, 2)))


def test_sum_at_the_largest_bound_is_finite() -> None:
    query = Sum(lower=0.0, upper=1e100, epsilon=1.0)
    for rng in (np.random.default_rng(3), None):
        assert math.isfinite(query.run(np.full(10, 1e308), rng=rng).value)


@pytest.mark.parametrize("name", ["exponential", "report_noisy_max", "permute_and_flip"])
def test_a_batch_of_selections_is_that_many_releases(name: str) -> None:
    mechanism = dpkit.mechanism(name, epsilon=1.0)
    assert mechanism.releases(np.zeros((1000, 5))) == 1000
    assert mechanism.releases(np.zeros((4, 25, 5))) == 100
    assert mechanism.releases(np.zeros(5)) == 1
    for bad in (np.zeros((3, 0)), np.array(1.0), np.array([["a", "b"]])):
        with pytest.raises(dpkit.InvalidData):
            mechanism.check_input(bad)


def test_answer_mechanisms_make_one_release_of_a_vector() -> None:
    answers: tuple[tuple[str, dict[str, Any]], ...] = (
        ("laplace", {}),
        ("geometric", {}),
        ("gaussian", {"delta": 1e-6}),
    )
    for name, params in answers:
        mechanism = dpkit.mechanism(name, epsilon=1.0, **params)
        assert mechanism.releases(np.zeros((1000, 5))) == 1
        with pytest.raises(dpkit.InvalidData, match="text"):
            mechanism.check_input(np.array(["1.0"]))


def test_selection_coerce() -> None:
    mechanism = dpkit.mechanism("exponential", epsilon=1.0)
    coerced = mechanism.coerce(
        np.array([[np.nan, np.inf, -np.inf, 1.0], [-np.inf, np.nan, -np.inf, -np.inf]]), rng=None
    )
    np.testing.assert_array_equal(coerced, [[-np.inf, MAX_FINITE, -np.inf, 1.0], [0, 0, 0, 0]])
    # The capped candidate always wins in both modes (its lead is beyond any noise).
    for rng in (np.random.default_rng(4), None):
        assert mechanism.randomize(coerced[:1], rng=cast(Any, rng)).tolist() == [1]


def test_answer_coerce() -> None:
    values = _object(np.nan, np.inf, -np.inf, "x", 2.6, None, 10**400)
    np.testing.assert_array_equal(
        Laplace(epsilon=1.0).coerce(values, rng=None),
        [0.0, MAX_FINITE, -MAX_FINITE, 0.0, 2.6, 0.0, 2.0**53],  # beyond 2**53: clamped there
    )
    np.testing.assert_array_equal(
        dpkit.mechanism("geometric", epsilon=1.0).coerce(values, rng=None),
        [0, 2**62, -(2**62), 0, 2, 0, 2**62],  # 2.6 rounded down: ⌊·⌋ keeps an integer Δ
    )


def test_the_secure_lattice_clamps_instead_of_failing() -> None:
    step = 2.0**-20
    steps = lattice_steps(np.array([1e30, -1e30, 3.0, MAX_FINITE]), step, owner="t", noise="n")
    assert steps.dtype == np.int64
    assert steps.tolist() == [LATTICE_LIMIT, -LATTICE_LIMIT, 3 * 2**20, LATTICE_LIMIT]
    for mechanism in (Laplace(epsilon=1.0), Gaussian(epsilon=1.0, delta=1e-5)):
        g = mechanism.lattice_step()
        out = mechanism.randomize(np.array([1e30, -1e30]), rng=None)
        # ±(2^61 − 1)·g plus noise of a few units: far below 1e30, and on the lattice.
        np.testing.assert_allclose(out, [LATTICE_LIMIT * g, -LATTICE_LIMIT * g], rtol=1e-6)
        assert np.array_equal(out / g, np.round(out / g))


def test_local_coerce_replaces_out_of_domain_values_uniformly() -> None:
    krr = dpkit.mechanism("krr", epsilon=1.0, k=4)
    values = np.array([0, 3, -1, 4, 2] + [7] * 40_000)
    for rng in (np.random.default_rng(5), dpkit.SecureRandom()):
        coerced = krr.coerce(values, rng=rng)
        assert coerced.shape == values.shape and coerced.dtype == np.int64
        assert coerced[:2].tolist() == [0, 3] and coerced[4] == 2  # valid values unchanged
        counts = np.bincount(coerced[5:], minlength=4)
        assert counts.sum() == 40_000 and np.all(np.abs(counts - 10_000) < 600)  # ~6.9 sd
    labelled = dpkit.mechanism("krr", epsilon=1.0, categories=["bus", "bike", "car"])
    coerced = labelled.coerce(_object("bus", SECRET, None, "car", 1), rng=np.random.default_rng(6))
    assert coerced[0] == "bus" and coerced[3] == "car"
    assert set(coerced.tolist()) <= {"bus", "bike", "car"}
    rr = dpkit.mechanism("rr", epsilon=1.0)
    rr.check_input(np.array([True, False]))
    np.testing.assert_array_equal(rr.coerce(np.array([True, False]), rng=None), [1, 0])
    with pytest.raises(dpkit.InvalidData, match="1-D"):
        rr.check_input(np.zeros((2, 2)))
    with pytest.raises(dpkit.InvalidData, match="booleans"):
        krr.check_input(np.array([True]))
