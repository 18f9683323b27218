"""Every mechanism with a device path, on hostile inputs through that path (torch tensors and
array-api-strict arrays made to take it, as a CUDA tensor would): for inputs drawn from the
mechanism's declared domain (worst cases included), in hostile layouts (a strided view, a
narrower dtype, a tensor that requires grad), in both randomness modes, the device's reports
come back in the caller's type and the numpy path's shape, without an autograd graph, and each is a possible report of the declared law
(``log_probability`` > −∞ on the host, and where it has a device path the same
log-probabilities there — within two ulps where the device takes the logarithm of a value
depending on the input, within the derived bound of a sum of m of them for multibit, and
within the derived bound of docs/tensors.md for the selections' log-sum-exp and quadrature);
and a batch with one hostile value (NaN, ±∞, a
negative, a fraction, a huge number) is either refused — an ``InvalidData`` naming
``values`` (or the field the host's refusal names, e.g. a selection's ``utilities``), before a
single random word is drawn — or accepted by the numpy path too: a device never takes what the
host refuses.

The category mechanisms also take indices in any integer dtype narrower than their k (torch's
uint16, uint32 and uint64 included): their reports are the declared law's, in a dtype that
holds every output.

Mechanisms whose declared inputs are text (cms, hcms and rappor's items) have no tensor form:
their integer items on the device are covered in ``tests/unit/tensors``.

False-positive rate: 0. Draws are keyed or seeded, the checks exact, Hypothesis derandomized.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from support import device_reference, jax_arrays  # noqa: E402

import dpkit  # noqa: E402
from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData  # noqa: E402
from dpkit.tensors import device_random  # noqa: E402
from dpkit.testing import parameter_points  # noqa: E402
from dpkit.testing.inputs import Unsupported, plan_inputs  # noqa: E402
from dpkit.testing.strategies import mechanisms, neighbouring_pairs, parameters  # noqa: E402

REGISTRY = dpkit.load_registry()
DEVICE_NAMES = [
    name
    for name in REGISTRY.names()
    if "randomize" in getattr(REGISTRY.info(name).cls, "device_methods", ())
]
#: Device log-probabilities that take the device's logarithm of a value depending on the
#: input: within ``device_reference.LOG_ULPS`` of the host's (array-api-strict's log is numpy's).
LOG_OF_INPUT = frozenset({"duchi", "duchi_multi", "one_bit_mean", "multibit"})
#: Those that sum m such logarithms (multibit's m drawn features): within
#: ``device_reference.sum_of_logs_bound``.
SUM_OF_LOGS = frozenset({"multibit"})
#: Selections whose device log-probability is a log-sum-exp or a quadrature of logarithms of the
#: utilities: within the bound of docs/tensors.md (``device_reference``'s tolerances) of the
#: host's, on every layout but array-api-strict (numpy's operations: the host's bits).
SELECTION_TOLERANCE = {  # (utilities, mechanism) → the bound of docs/tensors.md
    "exponential": lambda u, m: device_reference.exponential_tolerance(u, m.rate),
    "permute_and_flip": lambda u, m: device_reference.permute_and_flip_tolerance(u, m.rate),
    "report_noisy_max": lambda u, m: device_reference.report_noisy_max_tolerance(u, m.scale),
}
#: The selections' bounds assume every exp, log, expm1 and log1p within one ulp of the
#: correctly rounded value; XLA's CPU log1p was measured 127 ulps off (docs/tensors.md), so on
#: JAX the bound is scaled by 128 (to first order each of its terms grows linearly with it).
JAX_SELECTION_SLACK = 128
#: Selections whose device formula is the host's to the bit where the functions are numpy's
#: (report_noisy_max's sums over the candidates run in another order there).
EXACT_ON_STRICT = ("exponential", "permute_and_flip")
KEY = bytes(range(3, 35))
LAYOUTS = (
    "torch",
    "torch strided",
    "torch narrow",
    "torch grad",
    "array-api-strict",
    *jax_arrays.LAYOUTS,
)
HOSTILE = (math.nan, math.inf, -math.inf, -1.0, 0.5, 2.0**62, 1e300)
SETTINGS = settings(
    max_examples=6,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture
def words_taken(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Host arrays take the device path; the list holds the size of every draw of words."""
    device_reference.on_device(monkeypatch)
    taken: list[int] = []
    real = device_random.DeviceWords.take

    def take(self: Any, count: int) -> Any:
        taken.append(count)
        return real(self, count)

    monkeypatch.setattr(device_random.DeviceWords, "take", take)
    return taken


def _host(value: Any) -> np.ndarray[Any, Any]:
    if isinstance(value, torch.Tensor):
        return value.view(torch.int64).numpy() if value.dtype == torch.uint64 else value.numpy()
    if jax_arrays.is_jax(value):
        return jax_arrays.to_numpy(value)
    return np.from_dlpack(value)


def _spelled(batch: np.ndarray[Any, Any], layout: str) -> Any:
    if layout == "torch strided":  # every other row of a tensor twice as long
        return torch.from_numpy(np.repeat(batch, 2, axis=0).copy())[::2]
    if layout == "torch narrow" and batch.dtype.kind in "iuf":
        narrow = batch.astype(np.int32 if batch.dtype.kind in "iu" else np.float32)
        if np.array_equal(narrow, batch):
            return torch.from_numpy(narrow)
    if layout == "torch grad" and batch.dtype.kind == "f":  # a release carries no graph back
        return torch.from_numpy(batch.copy()).requires_grad_(True)
    if layout == "array-api-strict":
        return xs.asarray(batch)
    if layout == "jax":
        return jax_arrays.asarray(batch)
    return torch.from_numpy(batch.copy())


def _numeric_batch(name: str, data: st.DataObject) -> tuple[Any, np.ndarray[Any, Any]]:
    mechanism = data.draw(mechanisms(REGISTRY.info(name).cls))
    try:
        plan = plan_inputs(mechanism, rng=np.random.default_rng(0))
    except Unsupported:
        pytest.skip(f"{name}: the auditor has no input plan for it")
    x, _ = data.draw(neighbouring_pairs(mechanism, plan))
    batch = plan.batch(x, 7)
    if batch.dtype.kind not in "biuf":
        pytest.skip(f"{name}: its declared inputs are text, which has no tensor form")
    return mechanism, batch


@pytest.mark.parametrize("name", DEVICE_NAMES)
@SETTINGS
@given(data=st.data(), layout=st.sampled_from(LAYOUTS), mode=st.sampled_from(["secure", "fast"]))
def test_device_reports_are_reports_of_the_declared_law(
    name: str, data: st.DataObject, layout: str, mode: str, words_taken: list[int]
) -> None:
    mechanism, batch = _numeric_batch(name, data)
    spelled = _spelled(batch, layout)
    if mode == "secure":
        rng: Any = SecureRandom.from_key(KEY)
    else:
        rng = (
            torch.Generator().manual_seed(5)
            if layout.startswith("torch")
            else jax_arrays.jax.random.key(5)
            if layout == "jax"
            else np.random.default_rng(5)
        )
    words_taken.clear()
    got = mechanism.randomize(spelled, rng=rng)
    assert words_taken, "the device path was not taken"
    assert type(got) is type(spelled)
    assert not getattr(got, "requires_grad", False), "a release with a graph back to its input"
    expected = mechanism.randomize(batch, rng=np.random.default_rng(0))
    reports = _host(got)
    assert reports.shape == np.shape(expected)
    if mechanism.has_exact_distribution:
        log_p = mechanism.log_probability(reports.astype(np.asarray(expected).dtype), batch)
        assert np.all(np.asarray(log_p) > -np.inf), "a report the declared law cannot give"
        if "log_probability" in mechanism.device_methods:  # scored there, as on the host
            on_device = mechanism.log_probability(got, spelled)
            assert type(on_device) is type(spelled)
            host = np.asarray(mechanism.log_probability(reports, batch))
            strict = layout == "array-api-strict"
            if name in SELECTION_TOLERANCE and not (strict and name in EXACT_ON_STRICT):
                bound = SELECTION_TOLERANCE[name](batch, mechanism)
                if layout == "jax":  # XLA's log1p measured 127 ulps off where the bound has 1
                    bound = JAX_SELECTION_SLACK * bound
                chosen = np.take_along_axis(bound, reports[..., None].astype(np.int64), -1)
                device_reference.assert_selection_log_agrees(_host(on_device), host, chosen[..., 0])
            elif layout == "jax":  # XLA may fuse a product and a sum (one rounding fewer)
                # A few ulps of the terms: a value near 0 by cancellation (Laplace's
                # −|y − x|/b − ln 2b with |y − x|/b ≈ −ln 2b) errs at its terms' scale, which
                # the batch's largest finite value bounds from below in these batches.
                finite = host[np.isfinite(host)]
                scale = float(np.abs(finite).max(initial=0.0))
                assert np.allclose(
                    _host(on_device), host, rtol=2**-48, atol=2**-48 * scale, equal_nan=True
                )
            elif name in SUM_OF_LOGS and layout != "array-api-strict":  # m device logs
                d, m = mechanism.dimension, mechanism.sampled
                device_reference.assert_sum_of_logs_agrees(
                    _host(on_device), host, terms=m, constant=math.log(math.comb(d, m))
                )
            elif name in LOG_OF_INPUT and layout != "array-api-strict":  # the device's log
                device_reference.assert_log_agrees(_host(on_device), host)
            else:
                assert np.array_equal(_host(on_device), host, equal_nan=True)


@pytest.mark.parametrize("name", DEVICE_NAMES)
@SETTINGS
@given(data=st.data(), hostile=st.sampled_from(HOSTILE))
def test_a_hostile_value_is_refused_before_any_draw_or_accepted_by_the_host_too(
    name: str, data: st.DataObject, hostile: float, words_taken: list[int]
) -> None:
    mechanism, batch = _numeric_batch(name, data)
    spoiled = batch.astype(np.float64)
    spoiled.flat[data.draw(st.integers(0, spoiled.size - 1))] = hostile
    words_taken.clear()

    def rng() -> Any:
        return SecureRandom.from_key(KEY)

    try:
        mechanism.randomize(torch.from_numpy(spoiled), rng=rng())
    except InvalidData as refused:
        assert not words_taken, "words were drawn before the refusal"
        try:
            mechanism.randomize(spoiled, rng=rng())
        except InvalidData as host:  # refused on both paths: naming the same field
            assert refused.field == host.field
        else:
            assert refused.field == "values"
        return
    mechanism.randomize(spoiled, rng=rng())  # the host takes it too


#: The category mechanisms with a device path whose parameter k is their number of categories.
WIDE_K = [
    name
    for name in DEVICE_NAMES
    if "k" in REGISTRY.info(name).cls.parameters()
    and isinstance(
        REGISTRY.info(name).cls(**parameter_points(REGISTRY.info(name).cls)[0]).domain,
        dpkit.plugin.CategoricalDomain,
    )
]
NARROW_INDICES = ("int8", "uint8", "int16", "uint16", "uint32", "uint64")


def _largest_output(mechanism: Any) -> int | None:
    """The largest integer output of a small finite output space (None if there is none)."""
    try:
        space = np.asarray(mechanism.output_space())
    except Exception:  # no finite output space (olh), or too large to list
        return None
    if space.dtype.kind not in "iu" or space.ndim != 1:
        return None
    return int(space.max())


@pytest.mark.parametrize("name", WIDE_K)
@SETTINGS
@given(
    data=st.data(),
    k=st.integers(129, 1000),
    dtype=st.sampled_from(NARROW_INDICES),
    mode=st.sampled_from(["secure", "fast"]),
)
def test_indices_in_a_dtype_narrower_than_k_give_reports_of_the_declared_law(
    name: str, data: st.DataObject, k: int, dtype: str, mode: str, words_taken: list[int]
) -> None:
    """Indices below 128 in any integer dtype (torch's uint16, uint32 and uint64, which it
    cannot compare, included) with k beyond the dtype's range: the device releases (no error),
    each report is one the declared law can give, and an integer report's dtype holds every
    output (a k-RR report in uint8 used to wrap around)."""
    cls = REGISTRY.info(name).cls
    mechanism = cls(**{**data.draw(parameters(cls)), "k": k})
    batch = np.asarray(data.draw(st.lists(st.integers(0, 127), min_size=1, max_size=40)))
    spelled = torch.from_numpy(batch).to(getattr(torch, dtype))
    rng = SecureRandom.from_key(KEY) if mode == "secure" else torch.Generator().manual_seed(5)
    words_taken.clear()
    got = mechanism.randomize(spelled, rng=rng)
    assert words_taken, "the device path was not taken"
    assert type(got) is torch.Tensor
    reports = _host(got)
    largest = _largest_output(mechanism)
    if largest is not None and reports.dtype.kind in "iu":
        assert np.iinfo(reports.dtype).max >= largest, "a report dtype narrower than the law"
    if mechanism.has_exact_distribution:
        expected = np.asarray(mechanism.randomize(batch, rng=np.random.default_rng(0)))
        log_p = mechanism.log_probability(reports.astype(expected.dtype), batch)
        assert np.all(np.asarray(log_p) > -np.inf), "a report the declared law cannot give"


@pytest.mark.parametrize("name", DEVICE_NAMES)
@pytest.mark.parametrize("dtype", ["complex128", "bool"])
def test_a_dtype_the_host_refuses_is_refused_by_the_device_before_any_draw(
    name: str, dtype: str, words_taken: list[int]
) -> None:
    """The batch of a typical instance spelled in a dtype the host may refuse (complex numbers,
    booleans): where the host refuses it, the device refuses it too, by an ``InvalidData`` and
    before any word is drawn (rr's device path took complex 0/1 and returned them complex)."""
    cls = REGISTRY.info(name).cls
    mechanism = cls(**parameter_points(cls)[len(parameter_points(cls)) // 2])
    try:
        batch = plan_inputs(mechanism, rng=np.random.default_rng(0)).batch(0, 3)
    except Unsupported:
        pytest.skip(f"{name}: the auditor has no input plan for it")
    if batch.dtype.kind not in "biuf":
        pytest.skip(f"{name}: its declared inputs are text, which has no tensor form")
    spelled = batch.astype(dtype)
    try:
        mechanism.randomize(spelled, rng=SecureRandom.from_key(KEY))
    except InvalidData:
        words_taken.clear()
        with pytest.raises(InvalidData):
            mechanism.randomize(torch.from_numpy(spelled), rng=SecureRandom.from_key(KEY))
        assert not words_taken, "words were drawn before the refusal"
