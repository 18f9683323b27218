"""``log_probability`` on the device path, run on the CPU (torch tensors and array-api-strict
arrays treated as an accelerator's): for rr, krr, sue, oue, olh, hr, dbitflip, cms, hcms, laplace,
geometric, gaussian, pm, sw, pm_multi, graph_rr, graph_arr, graph_degree and graph_kstar the device computes the host's formula with the same float64
operations in the same order, so the result equals the host's on the same numpy arrays exactly
(NaN where the host has NaN), over the whole output space or a grid with outputs outside it;
for duchi, duchi_multi and one_bit_mean, which take the logarithm of a value that depends on
the input, the same operations up to that value and the device's ``log`` (``log1p``) of it: on
torch within two ulps of the host's value (``support.device_reference.LOG_ULPS``; torch's CPU
``log`` and ``log1p`` are measured one ulp from numpy's on about 0.3 % and 3 % of arguments),
NaN, ±inf and 0 exactly where the host has them, and on array-api-strict, whose ``log`` is
numpy's, equal to the bit; for multibit, which sums m such logarithms in the host's order,
within the bound derived in ``support.device_reference.sum_of_logs_bound`` (on
array-api-strict to the bit); for exponential and permute_and_flip (a log-sum-exp, a quadrature
of logarithms of the utilities) within the absolute bound derived in docs/tensors.md on torch
and to the bit on array-api-strict, and for report_noisy_max (a segment expansion, branch-free
on the device) within its bound, which grows with the expansion's cancellation, on both; −inf
exactly where the host's is; in the caller's type, float64, broadcast as on the host; numpy
operands copied to the device; and the host's refusals (the same field), the dtypes and shapes
before any value. pem, treehist and rappor: ``test_device_telemetry_log_probability.py``."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from dpkit_central import exponential, gaussian, geometric, laplace, noisy_max  # noqa: E402
from dpkit_ldp import (  # noqa: E402
    _adjacency as adjacency,
)
from dpkit_ldp import (  # noqa: E402
    count_mean_sketch,
    dbitflip,
    duchi,
    graph_arr,
    graph_degree,
    graph_features,
    graph_rr,
    hadamard,
    kary_rr,
    local_hashing,
    one_bit_mean,
    piecewise,
    randomized_response,
    sampled,
    square_wave,
    unary_encoding,
)
from support import device_reference  # noqa: E402

from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData  # noqa: E402
from dpkit.tensors import device_random  # noqa: E402
from dpkit.tensors import log_probability as device_log_probability  # noqa: E402, F401

RR = randomized_response.RandomizedResponse(epsilon=1.3)
KRR = kary_rr.KaryRandomizedResponse(epsilon=0.7, k=5)
SUE = unary_encoding.SymmetricUnaryEncoding(epsilon=1.0, k=10)  # two bytes, six padding bits
OUE = unary_encoding.OptimizedUnaryEncoding(epsilon=2.0, k=8)  # one byte, no padding
HR = hadamard.HadamardResponse(epsilon=1.1, k=6)  # reports in [8]
OLH = local_hashing.OptimalLocalHashing(epsilon=1.2, k=5)
DBF = dbitflip.DBitFlip(epsilon=1.0, k=5, d=3)
DBF_T = dbitflip.DBitFlip(epsilon=2.0, k=3, d=2, reports=2)  # two memoized reports
LAPLACE = laplace.Laplace(epsilon=0.9, sensitivity=2.0)
GEOMETRIC = geometric.Geometric(epsilon=0.5)
GAUSSIAN = gaussian.Gaussian(epsilon=1.0, delta=1e-6)
PM = piecewise.Piecewise(epsilon=1.0, lower=-2.0, upper=3.0)  # reports within 0.5 ± 10.2
SW = square_wave.SquareWave(epsilon=1.5, lower=-1.0, upper=2.0)  # reports within [-2.1, 3.1]
# The logarithm of a value that depends on the input; at ε = 700 probabilities of exactly 1
# (log 0) and, for duchi_multi and one_bit_mean, of a few 2⁻⁶⁴ (the secure thresholds').
DUCHI = duchi.Duchi(epsilon=0.8, lower=-2.0, upper=3.0)
DUCHI_700 = duchi.Duchi(epsilon=700.0, lower=-2.0, upper=3.0)
DUCHI_MULTI = duchi.DuchiMulti(epsilon=1.0, lower=0.0, upper=1.0, dimension=3)
DUCHI_MULTI_700 = duchi.DuchiMulti(epsilon=700.0, lower=-1.0, upper=2.0, dimension=4)
OBM = one_bit_mean.OneBitMean(epsilon=1.3, lower=0.0, upper=2.0, intervals=3)
OBM_700 = one_bit_mean.OneBitMean(epsilon=700.0, lower=-1.0, upper=1.0, reports=2)

LIBRARIES: dict[str, Callable[[np.ndarray[Any, Any]], Any]] = {
    "torch": lambda a: torch.from_numpy(np.ascontiguousarray(a)),
    "array-api-strict": xs.asarray,
}


@pytest.fixture
def on_device(monkeypatch: pytest.MonkeyPatch) -> None:
    device_reference.on_device(monkeypatch)


def _numpy(value: Any) -> np.ndarray[Any, Any]:
    return value.numpy() if isinstance(value, torch.Tensor) else np.from_dlpack(value)


def _space(mechanism: Any) -> np.ndarray[Any, Any]:
    """Every packed report of a unary encoding (2^k rows)."""
    k = mechanism.k
    bits = (np.arange(1 << k)[:, None] >> np.arange(k - 1, -1, -1)) & 1
    return np.packbits(bits.astype(np.uint8), axis=-1)


def _grid(mechanism: Any) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(outputs, inputs) broadcasting to (inputs, outputs): every output and input, and
    outputs outside the output space where the host scores them."""
    if mechanism in (RR, KRR):
        k = 2 if mechanism is RR else mechanism.k
        return np.arange(-1, k + 2), np.arange(k)[:, None]
    if mechanism in (SUE, OUE):
        return _space(mechanism), np.arange(mechanism.k)[:, None]
    if mechanism is HR:  # the host refuses an output outside [K]
        return np.arange(mechanism.output_size), np.arange(mechanism.k)[:, None]
    if mechanism is OLH:
        return _olh_reports(), np.arange(mechanism.k)[:, None]
    if mechanism in (DBF, DBF_T):  # every report and invalid ones: a repeated or large bucket,
        # a bit 2, a bucket 2^64 - 1 (as uint64) and differing memoized reports
        space = mechanism.output_space()
        if mechanism is DBF:
            invalid = np.array(
                [
                    [[0, 1], [0, 0], [2, 1]],
                    [[5, 0], [1, 1], [2, 0]],
                    [[0, 2], [1, 0], [2, 1]],
                    [[2**64 - 1, 0], [1, 0], [2, 0]],
                ],
                dtype=np.uint64,
            )
        else:
            invalid = np.array([[[[0, 1], [1, 0]]] * 2] * 2, dtype=np.uint64)
            invalid[0, 1, 1, 0], invalid[1, 1, 1, 1] = 2, 1  # the second report differs
        reports = np.concatenate([space, invalid])
        return reports, np.arange(mechanism.k)[:, None]
    special = [np.inf, -np.inf, np.nan, 1e15 + 0.5, -7.25]
    outputs = np.concatenate([np.arange(-6.0, 6.5, 0.5), special])
    if mechanism is PM:  # its reports reach ±10.2 around 0.5
        outputs = np.concatenate([outputs, [-9.75, 10.75, -11.0, 12.0]])
    return outputs, np.array([[0.0], [2.0], [-3.5], [np.nan], [0.1]])


def _olh_reports() -> np.ndarray[Any, Any]:
    """Reports of every category, hash seeds with their high bits set (so that a·x + b wraps
    2⁶⁴), and reports with y outside [g] or with high bits (scored as a lie by the host)."""
    rng = np.random.default_rng(11)
    reports = OLH.randomize(np.repeat(np.arange(OLH.k), 8), rng=rng)
    reports[::2, :2] |= np.uint64(1 << 63)
    reports[::2, 2] = OLH.hash(reports[::2, :2], np.repeat(np.arange(OLH.k), 8)[::2])
    odd = reports[:6].copy()
    odd[:3, 2] = np.uint64(OLH.range)
    odd[3:, 2] |= np.uint64(1 << 40)
    return np.concatenate([reports, odd])


CASES = [RR, KRR, SUE, OUE, OLH, HR, DBF, DBF_T, LAPLACE, GEOMETRIC, GAUSSIAN, PM, SW]
LOG_CASES = [DUCHI, DUCHI_700, DUCHI_MULTI, DUCHI_MULTI_700, OBM, OBM_700]


def _log_grid(mechanism: Any) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(outputs, inputs) of a mechanism taking the logarithm of an input-dependent value,
    broadcasting to (inputs, outputs): every report and reports outside the output space, and
    inputs at the domain's ends, beyond them (clipped), NaN and 1500 drawn uniformly."""
    lower, upper = mechanism.lower, mechanism.upper
    ends = [lower, upper, lower - 1.0, upper + 4.0, np.nan, np.nextafter(upper, np.inf)]
    rng = np.random.default_rng(5)
    if isinstance(mechanism, duchi.DuchiMulti):
        d = mechanism.dimension
        rows = np.concatenate(
            [np.array(ends)[:, None] * np.ones(d), rng.uniform(lower, upper, (300, d))]
        )
        rows[-1, 0] = np.nan  # one coordinate NaN
        vertices = mechanism.output_space()
        off = np.stack([vertices[0] * 0.5, np.full(d, np.nan), vertices[-1] + 1e-9])
        return np.concatenate([vertices, off])[None], rows[:, None]
    inputs = np.concatenate([ends, rng.uniform(lower, upper, 1500)])[:, None]
    if isinstance(mechanism, duchi.Duchi):
        low, high = mechanism.output_space()
        outputs = np.array([low, high, np.nextafter(high, np.inf), 0.0, np.nan, np.inf])
    elif mechanism.reports == 1:
        outputs = np.array([0.0, 1.0, 2.0, 0.5, np.nan, -1.0])
    else:  # memoized reports: identical ones, and differing ones (scored −inf)
        outputs = np.array([[0, 0], [1, 1], [0, 1], [1, 0], [2, 2]], dtype=np.uint8)
    return outputs, inputs


def _spellings(
    mechanism: Any, outputs: np.ndarray, inputs: np.ndarray, *, list_outputs: bool = True
) -> list[Any]:
    """``log_probability`` with device operands on both sides, and with a numpy array or a list
    on one side (the caller's public data, copied to the device)."""
    tensor = torch.from_numpy(inputs)
    results = [
        mechanism.log_probability(torch.from_numpy(outputs), tensor),
        mechanism.log_probability(outputs, tensor),
        mechanism.log_probability(torch.from_numpy(outputs), inputs.tolist()),
    ]
    if list_outputs:
        results.append(mechanism.log_probability(outputs.tolist(), tensor))
    return results


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("mechanism", CASES, ids=lambda m: m.name)
def test_the_device_scores_every_output_as_the_host_does(mechanism: Any, library: str) -> None:
    outputs, inputs = _grid(mechanism)
    expected = mechanism.log_probability(outputs, inputs)
    spell = LIBRARIES[library]
    got = mechanism.log_probability(spell(outputs), spell(inputs))
    assert type(got) is type(spell(outputs))
    assert got.dtype == (torch.float64 if library == "torch" else xs.float64)
    # The same operations in the same order: equal to the bit (NaN where the host has NaN).
    assert np.array_equal(_numpy(got), expected, equal_nan=True)
    assert expected.shape == (inputs.shape[0], outputs.shape[0])
    if mechanism in (RR, KRR, HR, OLH):  # the whole output space (rr, krr: outside it)
        assert len(np.unique(expected)) == 2
    if mechanism in (DBF, DBF_T):  # the whole output space, then four or two invalid reports
        invalid = 4 if mechanism is DBF else 2
        assert (
            np.isfinite(expected[:, :-invalid]).all() and np.isneginf(expected[:, -invalid:]).all()
        )
        assert np.allclose(np.exp(expected[:, :-invalid]).sum(axis=1), 1.0)
    if mechanism in (PM, SW):  # in the band, outside it, and outside the reports' range
        assert np.isneginf(expected).any() and len(np.unique(expected[expected > -np.inf])) == 2


def _assert_the_law(
    mechanism: Any, outputs: np.ndarray[Any, Any], inputs: np.ndarray[Any, Any], got: Any
) -> None:
    """The device's values are the mechanism's law, not only the host's numbers: over the
    output space they are probabilities whose mean report is the input (each mechanism is
    unbiased), for the inputs within the domain; an input beyond it (rows 2, 3 and 5 of
    :func:`_log_grid`) is scored as the end it is clipped to (rows 0 and 1)."""
    if isinstance(mechanism, duchi.DuchiMulti):
        space = mechanism.output_space()
        x = inputs[:, 0, :]
        mean = np.exp(got[:, : len(space)]) @ space
        total = np.exp(got[:, : len(space)]).sum(axis=1)
    else:
        if isinstance(mechanism, duchi.Duchi):
            reports = outputs[:2]
        else:  # the estimator's x̂ of a 0 and of a 1 (the first two reports)
            reports = mechanism.to_data(mechanism.from_bits(np.array([0, 1])))
        x = inputs
        mean = np.exp(got[:, :2]) @ reports[:, None]
        total = np.exp(got[:, :2]).sum(axis=1)
    within = np.all((x >= mechanism.lower) & (x <= mechanism.upper), axis=1)
    assert within.sum() > 300
    assert np.allclose(total[within], 1.0, rtol=0.0, atol=1e-12)
    assert np.allclose(mean[within], x[within], rtol=0.0, atol=1e-9)
    for beyond, end in ((2, 0), (3, 1), (5, 1)):
        assert np.array_equal(got[beyond], got[end])


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("mechanism", LOG_CASES, ids=lambda m: f"{m.name}-{m.epsilon:g}")
def test_the_logarithm_of_the_input_is_the_devices_within_two_ulps_of_the_hosts(
    mechanism: Any,
) -> None:
    outputs, inputs = _log_grid(mechanism)
    expected = mechanism.log_probability(outputs, inputs)
    # The grid reaches finite values, −inf (outputs outside the space, or a probability 0),
    # NaN (a NaN input) and, for a bit or ±B at ε = 700, 0 (a probability of exactly 1).
    assert np.isfinite(expected).any() and np.isneginf(expected).any()
    assert np.isnan(expected).any()
    assert (expected == 0.0).any() == (mechanism in (DUCHI_700, OBM_700))
    got = mechanism.log_probability(torch.from_numpy(outputs), torch.from_numpy(inputs))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
    device_reference.assert_log_agrees(got.numpy(), expected)
    _assert_the_law(mechanism, outputs, inputs, got.numpy())
    # array-api-strict's log is numpy's: every other operation the same, so the same bits.
    got = mechanism.log_probability(xs.asarray(outputs), xs.asarray(inputs))
    assert isinstance(got, type(xs.asarray(outputs))) and got.dtype == xs.float64
    assert np.array_equal(_numpy(got), expected, equal_nan=True)


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("mechanism", LOG_CASES, ids=lambda m: f"{m.name}-{m.epsilon:g}")
def test_a_logarithm_of_the_input_broadcasts_and_takes_numpy_operands(mechanism: Any) -> None:
    outputs, inputs = _log_grid(mechanism)
    if isinstance(mechanism, duchi.DuchiMulti):  # (1, V, d) against (2, 3, 1, d)
        outputs, inputs = outputs[:, :6], inputs[6:12].reshape(2, 3, 1, -1)
        shape = (2, 3, 6)
    else:  # (2, 1, R…) against (3, 1): R the memoized reports
        outputs, inputs = outputs[None, None, :3], inputs[10:13].astype(np.float32)
        shape = (1, 3, 3)
    expected = mechanism.log_probability(outputs, inputs)
    assert expected.shape == shape
    for got in _spellings(mechanism, outputs, inputs):
        assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
        device_reference.assert_log_agrees(got.numpy(), expected)
    mismatched = np.zeros((4, 5), dtype=inputs.dtype)  # does not broadcast with the outputs
    for inputs in (mismatched, torch.from_numpy(mismatched)):  # numpy's error, before values
        with pytest.raises(ValueError) as refused:
            mechanism.log_probability(torch.from_numpy(outputs), inputs)
        assert not isinstance(refused.value, InvalidData)


@pytest.mark.usefixtures("on_device")
def test_a_logarithm_of_the_input_refuses_as_the_host_shapes_and_dtypes_first() -> None:
    # duchi_multi: rows of d values; a 0-d operand or another last axis is the host's error.
    for outputs, inputs in ((np.zeros(()), np.zeros(())), (np.zeros((2, 3)), np.zeros((2, 1)))):
        with pytest.raises(ValueError, match="rows of 4 values"):
            DUCHI_MULTI_700.log_probability(outputs, inputs)
        with pytest.raises(ValueError, match="rows of 4 values"):
            DUCHI_MULTI_700.log_probability(torch.from_numpy(outputs), inputs)
    # one_bit_mean with T memoized reports: a 0-d report has no reports' axis.
    with pytest.raises(IndexError):
        OBM_700.log_probability(np.uint8(1), 0.0)
    with pytest.raises(IndexError):
        OBM_700.log_probability(torch.tensor(1, dtype=torch.uint8), 0.0)
    # Dtypes: the device reads real numbers only (the host casts, or compares, others).
    with pytest.raises(InvalidData) as refused:
        OBM.log_probability(torch.zeros(3, dtype=torch.complex128), [0.0, 1.0, 2.0])
    assert refused.value.field == "outputs"
    with pytest.raises(InvalidData) as refused:
        DUCHI.log_probability(torch.zeros(3), torch.zeros(3, dtype=torch.complex128))
    assert refused.value.field == "inputs"
    # Booleans and integers are reports as on the host.
    bits = np.array([True, False, True])
    for spelled in (torch.from_numpy(bits), torch.from_numpy(bits.astype(np.int16))):
        got = OBM.log_probability(spelled, [0.5, 1.0, 2.0])
        assert np.array_equal(got.numpy(), OBM.log_probability(bits, [0.5, 1.0, 2.0]))


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("mechanism", CASES, ids=lambda m: m.name)
def test_the_operands_broadcast_and_a_numpy_operand_is_copied_to_the_device(
    mechanism: Any,
) -> None:
    rng = np.random.default_rng(4)
    if mechanism in (SUE, OUE):
        outputs = _space(mechanism)[rng.integers(0, 1 << mechanism.k, size=(2, 1, 3))]
        inputs = rng.integers(0, mechanism.k, size=(4, 1))
    elif mechanism in (RR, KRR):
        outputs = rng.integers(0, 2 if mechanism is RR else mechanism.k, size=(2, 1, 3))
        inputs = rng.integers(0, 2 if mechanism is RR else mechanism.k, size=(4, 1))
    elif mechanism is HR:
        outputs = rng.integers(0, mechanism.output_size, size=(2, 1, 3)).astype(np.uint8)
        inputs = rng.integers(0, mechanism.k, size=(4, 1))
    elif mechanism is OLH:
        outputs = _olh_reports()[rng.integers(0, 40, size=(2, 1, 3))]
        inputs = rng.integers(0, mechanism.k, size=(4, 1))
    elif mechanism in (DBF, DBF_T):
        outputs = mechanism.output_space()[rng.integers(0, 8, size=(2, 1, 3))].astype(np.int64)
        inputs = rng.integers(0, mechanism.k, size=(4, 1))
    else:
        outputs = rng.integers(-4, 5, size=(2, 1, 3)).astype(np.float64)
        inputs = rng.integers(-4, 5, size=(4, 1)).astype(np.float32)
    expected = mechanism.log_probability(outputs, inputs)
    assert expected.shape == (2, 4, 3)
    tensor = torch.from_numpy(inputs)
    # A list of bytes is int64, refused as reports by both paths: no list outputs for those.
    results = _spellings(mechanism, outputs, inputs, list_outputs=mechanism not in (SUE, OUE, OLH))
    if mechanism is OLH:  # numpy reads a list of seeds above 2⁶³ as float64: refused, not rounded
        with pytest.raises(InvalidData) as refused:
            mechanism.log_probability(outputs.tolist(), tensor)
        assert refused.value.field == "outputs"
    for got in results:
        assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
        assert np.array_equal(got.numpy(), expected)
    mismatched = np.zeros((4, 2), dtype=inputs.dtype)  # (2, 1, 3) and (4, 2) do not broadcast
    with pytest.raises(ValueError):
        mechanism.log_probability(outputs, mismatched)
    with pytest.raises(ValueError):  # numpy's error, before any value is read
        mechanism.log_probability(torch.from_numpy(outputs), torch.from_numpy(mismatched))


@pytest.mark.usefixtures("on_device")
def test_randomized_response_compares_dtypes_as_numpy_does() -> None:
    outputs = np.array([0.0, 1.0, 0.5, 1.0])
    for inputs in (np.array([True, True, False, True]), np.array([0, 1, 1, 1], dtype=np.uint8)):
        expected = RR.log_probability(outputs, inputs)
        for spell in LIBRARIES.values():
            got = RR.log_probability(spell(outputs), spell(inputs))
            assert np.array_equal(_numpy(got), expected)


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize(
    ("reports", "indices", "field"),
    [
        (np.zeros((3, 2), dtype=np.int16), np.zeros(3, dtype=np.int64), "reports"),
        (np.zeros((3, 3), dtype=np.uint8), np.zeros(3, dtype=np.int64), "reports"),
        (np.full((3, 2), 1, dtype=np.uint8), np.zeros(3, dtype=np.int64), "reports"),  # padding
        (np.zeros((3, 2), dtype=np.uint8), np.zeros(3, dtype=np.float64), "inputs"),
        (np.zeros((3, 2), dtype=np.uint8), np.zeros(3, dtype=np.bool_), "inputs"),  # k = 10
        (np.zeros((3, 2), dtype=np.uint8), np.array([0, 10, 1]), "inputs"),
        (np.zeros((3, 2), dtype=np.uint8), np.array([0, -1, 1]), "inputs"),
    ],
    ids=["dtype", "width", "padding", "float indices", "booleans", "index k", "index -1"],
)
def test_unary_reports_are_refused_as_on_the_host(
    reports: np.ndarray[Any, Any], indices: np.ndarray[Any, Any], field: str
) -> None:
    with pytest.raises(InvalidData) as on_host:
        SUE.log_probability(reports, indices)
    for spell in LIBRARIES.values():
        with pytest.raises(InvalidData) as on_device:
            SUE.log_probability(spell(reports), spell(indices))
        assert on_device.value.field == on_host.value.field == field


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize(
    ("reports", "indices", "field"),
    [
        (np.zeros(3, dtype=np.float64), np.zeros(3, dtype=np.int64), "outputs"),
        (np.zeros(3, dtype=np.bool_), np.zeros(3, dtype=np.int64), "outputs"),  # K = 8
        (np.zeros(3, dtype=np.int8), np.zeros(3, dtype=np.float32), "inputs"),
        (np.zeros(3, dtype=np.int8), np.zeros(3, dtype=np.bool_), "inputs"),  # k = 6
        (np.array([0, 8, 1], dtype=np.int8), np.zeros(3, dtype=np.int64), "outputs"),
        (np.array([0, -1, 1]), np.zeros(3, dtype=np.int64), "outputs"),
        (np.array([2**63, 0, 1], dtype=np.uint64), np.zeros(3, dtype=np.int64), "outputs"),
        (np.zeros(3, dtype=np.int64), np.array([0, 6, 1], dtype=np.uint8), "inputs"),
        (np.zeros(3, dtype=np.int64), np.array([0, -1, 1], dtype=np.int16), "inputs"),
    ],
    ids=[
        "float outputs",
        "boolean outputs",
        "float inputs",
        "boolean inputs",
        "output K",
        "output -1",
        "output 2^63",
        "input k",
        "input -1",
    ],
)
def test_hadamard_reports_are_refused_as_on_the_host(
    reports: np.ndarray[Any, Any], indices: np.ndarray[Any, Any], field: str
) -> None:
    with pytest.raises(InvalidData) as on_host:
        HR.log_probability(reports, indices)
    assert on_host.value.field == field
    for spell in LIBRARIES.values():
        with pytest.raises(InvalidData) as on_device:
            HR.log_probability(spell(reports), spell(indices))
        assert on_device.value.field == field
        assert not re.search(r"contain -?\d", str(on_device.value))  # quotes no value


@pytest.mark.usefixtures("on_device")
def test_hadamard_decides_dtypes_and_shapes_before_any_value_and_takes_empty_inputs() -> None:
    out_of_range = torch.tensor([0, 9, 1])  # a value refusal for outputs, read last
    with pytest.raises(InvalidData) as refused:
        HR.log_probability(out_of_range, torch.zeros(3))  # float inputs: a dtype refusal
    assert refused.value.field == "inputs"
    with pytest.raises(ValueError) as refused:  # the shapes do not broadcast: numpy's error
        HR.log_probability(out_of_range, torch.zeros(2, dtype=torch.int64))
    assert not isinstance(refused.value, InvalidData)  # not the value's refusal
    outputs = np.arange(HR.output_size)
    empty = np.zeros((0, 1), dtype=np.float64)  # an empty input of any dtype
    assert HR.log_probability(outputs, empty).shape == (0, 8)
    assert HR.log_probability(torch.from_numpy(outputs), empty).shape == (0, 8)
    two = hadamard.HadamardResponse(epsilon=0.5, k=2)  # booleans index as 0/1 (k = 2)
    inputs = np.array([[True], [False]])
    expected = two.log_probability(np.arange(4), inputs)
    assert np.array_equal(expected, two.log_probability(np.arange(4), inputs.astype(np.int64)))
    got = two.log_probability(torch.arange(4), torch.from_numpy(inputs))
    assert np.array_equal(got.numpy(), expected)


@pytest.mark.usefixtures("on_device")
def test_unary_encoding_takes_empty_and_boolean_indices_as_the_host() -> None:
    two = unary_encoding.SymmetricUnaryEncoding(epsilon=1.0, k=2)
    reports = _space(two)
    indices = np.array([[True], [False]])
    expected = two.log_probability(reports, indices)  # booleans index as 0/1 (k = 2)
    assert np.array_equal(expected, two.log_probability(reports, indices.astype(np.int64)))
    assert np.array_equal(two.log_probability(torch.from_numpy(reports), indices).numpy(), expected)
    empty = np.zeros((0, 1), dtype=np.float64)  # an empty input of any dtype
    assert two.log_probability(torch.from_numpy(reports), empty).shape == (0, 4)
    assert two.log_probability(reports, empty).shape == (0, 4)


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("mechanism", CASES + LOG_CASES, ids=lambda m: m.name)
def test_two_libraries_are_refused_naming_the_field(mechanism: Any) -> None:
    outputs, inputs = (_log_grid if mechanism in LOG_CASES else _grid)(mechanism)
    with pytest.raises(InvalidData, match="give both on one device") as refused:
        mechanism.log_probability(torch.from_numpy(outputs), xs.asarray(inputs))
    assert refused.value.field == "inputs"


@pytest.mark.usefixtures("on_device")
def test_complex_numbers_and_text_are_refused_naming_the_field() -> None:
    with pytest.raises(InvalidData) as refused:
        LAPLACE.log_probability(torch.zeros(3, dtype=torch.complex128), torch.zeros(3))
    assert refused.value.field == "outputs"
    with pytest.raises(InvalidData) as refused:
        RR.log_probability(torch.zeros(3), np.array(["a", "b", "c"]))
    assert refused.value.field == "inputs"


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize(
    "mechanism", [RR, SUE, GAUSSIAN, DUCHI_MULTI, OBM_700], ids=lambda m: m.name
)
def test_a_library_without_64_bit_types_is_refused_before_any_value(
    mechanism: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(device_random, "index_dtype", lambda xp: xp.int32)
    outputs = np.full((3, 2), 0xFF, dtype=np.uint8)  # padding bits set: a value refusal
    outputs = outputs if mechanism is SUE else outputs.astype(np.float64)
    with pytest.raises(InvalidData, match="log-probabilities are float64") as refused:
        mechanism.log_probability(torch.from_numpy(outputs), np.zeros((3, 1), dtype=np.int64))
    assert refused.value.field == "outputs"


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("mechanism", [PM, SW], ids=lambda m: m.name)
def test_a_report_at_the_edge_of_a_band_is_scored_as_on_the_host(
    mechanism: Any, library: str
) -> None:
    # The band's ends for random inputs, on the data's scale, and one ulp either side: each
    # compared with the host's rounding, so each on the host's side of the edge.
    x = np.random.default_rng(7).uniform(mechanism.lower, mechanism.upper, size=64)
    t = mechanism.standardize(x)
    if mechanism is PM:
        width = piecewise.piecewise_band_width(mechanism.epsilon)
        left = (1.0 + width / 2.0) * t - width / 2.0
        edges = np.stack([left, left + width])
    else:
        edges = np.stack([t - mechanism.half_width, t + mechanism.half_width])
    edges = mechanism.to_data(edges)
    outputs = np.concatenate([edges, np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf)])
    expected = mechanism.log_probability(outputs, x)
    assert len(np.unique(expected)) == 2  # both levels are met
    spell = LIBRARIES[library]
    got = mechanism.log_probability(spell(outputs), spell(x))
    assert np.array_equal(_numpy(got), expected)


@pytest.mark.usefixtures("on_device")
def test_dbitflip_reports_are_refused_as_on_the_host_and_shapes_first() -> None:
    reports = DBF.output_space()[:4]
    for inputs in (np.zeros(4, dtype=np.float64), np.zeros(4, dtype=np.bool_), [0, 5, 1, 2]):
        with pytest.raises(InvalidData) as on_host:
            DBF.log_probability(reports, inputs)
        with pytest.raises(InvalidData) as on_device:
            DBF.log_probability(torch.from_numpy(reports), inputs)
        assert on_device.value.field == on_host.value.field == "inputs"
        assert not re.search(r"contain -?\d", str(on_device.value))  # quotes no value
    for layout in ((4, 3, 3), (4, 2, 2)):  # not (d, 2) rows: numpy's error, before any value
        wrong = np.zeros(layout, dtype=np.uint64)
        with pytest.raises(ValueError):
            DBF.log_probability(wrong, [0, 9, 1, 2])
        with pytest.raises(ValueError) as refused:
            DBF.log_probability(torch.from_numpy(wrong), [0, 9, 1, 2])
        assert not isinstance(refused.value, InvalidData)  # not the value's refusal
    with pytest.raises(IndexError):  # T > 1 needs the reports' axis
        DBF_T.log_probability(np.zeros((2, 2), dtype=np.uint64), 0)
    with pytest.raises(IndexError):
        DBF_T.log_probability(torch.zeros((2, 2), dtype=torch.int64), 0)
    with pytest.raises(InvalidData) as refused:  # the host truncates floats; the device refuses
        DBF.log_probability(torch.from_numpy(reports.astype(np.float64)), [0, 9, 1, 2])
    assert refused.value.field == "outputs"
    empty = np.zeros((0, 1), dtype=np.float64)  # an empty input of any dtype
    assert DBF.log_probability(torch.from_numpy(reports), empty).shape == (0, 4)
    assert DBF.log_probability(reports, empty).shape == (0, 4)


@pytest.mark.usefixtures("on_device")
def test_local_hashing_reads_reports_as_the_host_casts_them_and_refuses_as_it_does() -> None:
    reports, inputs = _olh_reports(), np.arange(OLH.k)[:, None]
    expected = OLH.log_probability(reports, inputs)
    signed = reports.view(np.int64)  # the same bits, two's complement: read as the host reads
    assert np.array_equal(OLH.log_probability(signed, inputs), expected)
    for spell in LIBRARIES.values():
        got = OLH.log_probability(spell(signed), spell(inputs))
        assert np.array_equal(_numpy(got), expected)
    small = reports[:, :3].astype(np.uint8)  # narrower integers: zero-extended on both paths
    got = OLH.log_probability(torch.from_numpy(small), inputs)
    assert np.array_equal(got.numpy(), OLH.log_probability(small, inputs))
    for bad in (np.zeros(4, dtype=np.float64), np.zeros(4, dtype=np.bool_), [0, 5, 1, 2]):
        with pytest.raises(InvalidData) as on_host:
            OLH.log_probability(reports[:4], bad)
        with pytest.raises(InvalidData) as on_device:
            OLH.log_probability(torch.from_numpy(reports[:4]), bad)
        assert on_device.value.field == on_host.value.field == "inputs"
        assert not re.search(r"contain -?\d", str(on_device.value))  # quotes no value
    for wrong in (reports[:4, :2], reports[0, 0]):  # no y column, or no report axis at all
        with pytest.raises(IndexError):
            OLH.log_probability(wrong, [0, 3, 1, 2])
        with pytest.raises(IndexError):  # numpy's error, before the inputs' values are read
            OLH.log_probability(torch.from_numpy(np.asarray(wrong)), [0, 9, 1, 2])
    with pytest.raises(InvalidData) as refused:  # the host truncates floats; the device refuses
        OLH.log_probability(torch.from_numpy(reports.astype(np.float64)), 0)
    assert refused.value.field == "outputs"
    empty = np.zeros((0, 1), dtype=np.float64)  # an empty input of any dtype
    assert OLH.log_probability(torch.from_numpy(reports[:4]), empty).shape == (0, 4)
    assert OLH.log_probability(reports[:4], empty).shape == (0, 4)


# Sampled attributes: multibit sums m device logarithms (the bound of
# ``device_reference.sum_of_logs_bound``), pm_multi sums constants (the host's bits). d ≥ 8 so
# that a device's own reduction order, or numpy's pairwise one, would differ from the explicit
# left-to-right sum; at ε = 700 (m = d = 2, log C(d, m) = 0) probabilities of exactly 1 give 0.
MULTIBIT = graph_features.MultiBit(epsilon=4.0, lower=-2.0, upper=3.0, dimension=9, k=3)
MULTIBIT_700 = graph_features.MultiBit(epsilon=700.0, lower=-1.0, upper=1.0, dimension=2, k=2)
PM_MULTI = sampled.PiecewiseMulti(epsilon=7.3, lower=-1.7, upper=3.1, dimension=9, k=6)
SAMPLED_CASES = [MULTIBIT, MULTIBIT_700, PM_MULTI]


def _sampled_grid(mechanism: Any) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(outputs (1, R, d), inputs (N, 1, d)): every report of multibit (pm_multi: reports drawn
    in both modes at every input) and reports that are not possible (scored −inf: an attribute
    off the level or out of range, too few or too many drawn, NaN, ∞); inputs at the domain's
    ends, beyond them (clipped), with a NaN, and drawn uniformly."""
    d, lower, upper = mechanism.dimension, mechanism.lower, mechanism.upper
    rng = np.random.default_rng(8)
    ends = np.array([lower, upper, lower - 1.0, upper + 4.0, np.nextafter(upper, np.inf)])
    inputs = np.concatenate([ends[:, None] * np.ones(d), rng.uniform(lower, upper, (14, d))])
    inputs[-1, 0] = np.nan
    if isinstance(mechanism, graph_features.MultiBit):
        space = mechanism.output_space()
    else:
        within = np.clip(inputs, lower, upper)
        within[-1, 0] = lower
        space = np.concatenate(
            [
                mechanism.randomize(within, rng=np.random.default_rng(2)),
                mechanism.randomize(within, rng=SecureRandom.from_key(bytes([3]) * 32)),
            ]
        )
    centre = mechanism.centre
    off = np.repeat(space[:1], 6, axis=0)
    drawn = np.flatnonzero(off[0] != centre)
    off[0, drawn[0]] = centre + (off[0, drawn[0]] - centre) * (1 + 1e-6)  # off the level
    off[1, drawn[0]] = centre + 1e3  # out of range
    off[2, drawn[0]] = centre  # one attribute too few
    off[3, :] = centre + (off[3, drawn[0]] - centre)  # every attribute drawn
    off[4, drawn[0]], off[5, drawn[0]] = np.nan, np.inf
    if isinstance(mechanism, graph_features.MultiBit):  # numpy's isclose tolerance's edges
        d, m = mechanism.dimension, mechanism.sampled
        level = d / m * duchi.duchi_bound(mechanism.epsilon / m)
        tolerance = 1e-8 + 1e-9 * level  # isclose(|y|, level, rtol=1e-9): atol = 1e-8
        edge = np.repeat(space[:1], 4, axis=0)
        sign = np.sign(edge[0, drawn[0]] - centre)
        for row, slack in enumerate((0.9, 1.1, -0.9, -1.1)):
            z = sign * (level + slack * tolerance)
            edge[row, drawn[0]] = centre + mechanism.scale * z
        space = np.concatenate([space, edge])
    outputs = np.concatenate([space, off])
    if mechanism.sampled == d:  # no attribute left to draw: all at the centre instead
        outputs[-3] = centre
    return outputs[None], inputs[:, None]


def _sum_of_logs(mechanism: Any) -> dict[str, Any]:
    d, m = mechanism.dimension, mechanism.sampled
    return {"terms": m, "constant": math.log(math.comb(d, m))}


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("mechanism", SAMPLED_CASES, ids=lambda m: f"{m.name}-{m.epsilon:g}")
def test_sampled_attributes_are_scored_as_on_the_host(mechanism: Any) -> None:
    outputs, inputs = _sampled_grid(mechanism)
    expected = mechanism.log_probability(outputs, inputs)
    assert expected.shape == (inputs.shape[0], outputs.shape[1])
    multibit = isinstance(mechanism, graph_features.MultiBit)
    # Not possible: the last five reports, and multibit's off the level (pm_multi's a density).
    assert np.isfinite(expected).any() and np.isneginf(expected[:, -5:]).all()
    assert np.isneginf(expected[:, -6]).all() == multibit
    assert np.isnan(expected).any() == multibit  # pm_multi scores a NaN input as outside
    assert (expected == 0.0).any() == (mechanism is MULTIBIT_700)
    got = mechanism.log_probability(torch.from_numpy(outputs), torch.from_numpy(inputs))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
    if multibit:  # m device logarithms summed in the host's order: the derived bound
        device_reference.assert_sum_of_logs_agrees(got.numpy(), expected, **_sum_of_logs(mechanism))
        # The law, not only the host's numbers: a distribution over the reports, unbiased,
        # and an input beyond the domain scored as the end it is clipped to.
        space = mechanism.output_space()
        p = np.exp(got.numpy()[:, : len(space)])
        edges = expected[:, len(space) : len(space) + 4]  # inside, outside, inside, outside
        assert np.isneginf(edges[:, 1::2]).all() and not np.isneginf(edges[:, ::2]).any()
        within = np.all((inputs[:, 0] >= mechanism.lower) & (inputs[:, 0] <= mechanism.upper), 1)
        assert within.sum() >= 15
        assert np.allclose(p[within].sum(axis=1), 1.0, rtol=0.0, atol=1e-12)
        assert np.allclose(p[within] @ space, inputs[within, 0], rtol=0.0, atol=1e-9)
        assert np.array_equal(got.numpy()[2], got.numpy()[0])
        assert np.array_equal(got.numpy()[3], got.numpy()[1])
    else:  # constants and IEEE 754 operations in the host's order: the host's bits
        assert np.array_equal(got.numpy(), expected, equal_nan=True)
    # array-api-strict's log is numpy's: every other operation the same, so the same bits.
    got = mechanism.log_probability(xs.asarray(outputs), xs.asarray(inputs))
    assert isinstance(got, type(xs.asarray(outputs))) and got.dtype == xs.float64
    assert np.array_equal(_numpy(got), expected, equal_nan=True)


def test_the_sum_of_logs_bound_is_a_few_ulps_and_its_first_order_form() -> None:
    # (m + 2)·2⁻⁵²·A + 2⁻⁵²·c to first order: a few ulps of the total, so the comparison
    # above is not vacuous; the double just inside passes, the one just outside fails.
    total, m, c = -12.5, 3, math.log(84.0)
    bound = float(device_reference.sum_of_logs_bound(np.array([total]), terms=m, constant=c)[0])
    first_order = (m + 2) * 2.0**-52 * (-total - c) + 2.0**-52 * c
    assert first_order <= bound <= first_order * (1 + 1e-9)
    ulp = float(np.spacing(np.float64(-total)))
    inside = math.floor(bound / ulp)
    assert 1 <= inside <= 8
    expected = np.array([total])
    device_reference.assert_sum_of_logs_agrees(
        expected - inside * ulp, expected, terms=m, constant=c
    )
    with pytest.raises(AssertionError):
        device_reference.assert_sum_of_logs_agrees(
            expected - (inside + 1) * ulp, expected, terms=m, constant=c
        )


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("mechanism", SAMPLED_CASES, ids=lambda m: f"{m.name}-{m.epsilon:g}")
def test_sampled_attributes_broadcast_and_take_numpy_operands(mechanism: Any) -> None:
    outputs, inputs = _sampled_grid(mechanism)
    outputs, inputs = outputs[:, :5], inputs[5:11].reshape(2, 3, 1, -1).astype(np.float32)
    expected = mechanism.log_probability(outputs, inputs)
    assert expected.shape == (2, 3, 5)
    for got in _spellings(mechanism, outputs, inputs):
        assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
        if isinstance(mechanism, graph_features.MultiBit):
            device_reference.assert_sum_of_logs_agrees(
                got.numpy(), expected, **_sum_of_logs(mechanism)
            )
        else:
            assert np.array_equal(got.numpy(), expected)


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("mechanism", SAMPLED_CASES, ids=lambda m: f"{m.name}-{m.epsilon:g}")
def test_sampled_attributes_refuse_as_the_host_shapes_and_dtypes_first(
    mechanism: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = mechanism.dimension
    rows = f"rows of {d} values"
    # Rows of d values: a 0-d operand or another last axis is the host's error, on both.
    for outputs, inputs in ((np.zeros(()), np.zeros(())), (np.zeros((2, d + 1)), np.zeros(1))):
        with pytest.raises(ValueError, match=rows):
            mechanism.log_probability(outputs, inputs)
        with pytest.raises(ValueError, match=rows):
            mechanism.log_probability(torch.from_numpy(outputs), inputs)
    mismatched = np.zeros((4, d))  # (3, d) against (4, d): numpy's error, before any value
    for inputs in (mismatched, torch.from_numpy(mismatched)):
        with pytest.raises(ValueError) as refused:
            mechanism.log_probability(torch.zeros(3, d), inputs)
        assert not isinstance(refused.value, InvalidData)
    # Dtypes: the device reads real numbers only, naming the field; another library refused.
    with pytest.raises(InvalidData) as refused:
        mechanism.log_probability(torch.zeros(d, dtype=torch.complex128), np.zeros(d))
    assert refused.value.field == "outputs"
    with pytest.raises(InvalidData) as refused:
        mechanism.log_probability(torch.zeros(d), torch.zeros(d, dtype=torch.complex128))
    assert refused.value.field == "inputs"
    with pytest.raises(InvalidData, match="give both on one device") as refused:
        mechanism.log_probability(torch.zeros(d), xs.asarray(np.zeros(d)))
    assert refused.value.field == "inputs"
    monkeypatch.setattr(device_random, "index_dtype", lambda xp: xp.int32)
    with pytest.raises(InvalidData, match="log-probabilities are float64") as refused:
        mechanism.log_probability(torch.full((3, d), np.nan), np.zeros((3, 1)))
    assert refused.value.field == "outputs"


def test_hm_multi_declares_no_law() -> None:
    # hm_multi mixes a density and atoms (no single base measure): no log_probability to
    # run anywhere, so none on the device either.
    hybrid = sampled.HybridMulti(epsilon=4.0, dimension=3)
    assert not hybrid.has_exact_distribution
    assert "log_probability" not in hybrid.device_methods


# -- neighbour lists: graph_rr, graph_arr (a bit channel), graph_degree, graph_kstar (a count)

GRAPH_RR = graph_rr.GraphRandomizedResponse(epsilon=1.1, nodes=4)
GRAPH_RR_700 = graph_rr.GraphRandomizedResponse(epsilon=700.0, nodes=3)  # 1 − p₁ = 0
GRAPH_ARR = graph_arr.AsymmetricRandomizedResponse(epsilon=0.9, nodes=4, mu=0.3)
GRAPH_ARR_0 = graph_arr.AsymmetricRandomizedResponse(epsilon=700.0, nodes=3, mu=1e-30)  # p₀ = 0
CHANNELS = [GRAPH_RR, GRAPH_RR_700, GRAPH_ARR, GRAPH_ARR_0]
DEGREE = graph_degree.NoisyDegree(epsilon=0.8, nodes=5)
KSTAR = graph_degree.LocalKStars(epsilon=1.5, nodes=5, max_degree=3, k=2)  # projection: d > 3
COUNTS = [DEGREE, KSTAR]


def _lists(nodes: int) -> np.ndarray[Any, Any]:
    """Every list of ``nodes`` bits, then lists with entries the host reads as ``!= 0``."""
    space = (np.arange(1 << nodes)[:, None] >> np.arange(nodes - 1, -1, -1)) & 1
    hostile = np.zeros((3, nodes))
    hostile[0, 0], hostile[1, -1], hostile[2, :2] = np.nan, -1.0, (0.5, 2.0)
    return np.concatenate([space.astype(np.float64), hostile])


def _scalar(library: str, value: int, dtype: str) -> Any:
    """A 0-d array of ``library``."""
    if library == "torch":
        return torch.tensor(value, dtype=getattr(torch, dtype))
    return xs.asarray(value, dtype=getattr(xs, dtype))


@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("mechanism", CHANNELS, ids=lambda m: f"{m.name}-{m.epsilon:g}")
def test_the_device_scores_a_neighbour_list_report_as_the_host_does(
    mechanism: Any, library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    called = device_reference.on_device(monkeypatch, [(adjacency, "_device_bit_log_probability")])
    lists = _lists(mechanism.nodes)
    reports = np.concatenate([mechanism.output_space(), lists[-3:] != 0])  # and as floats
    outputs, inputs = reports[None].astype(np.float64), lists[:, None]
    outputs[0, -1, 0] = np.nan  # a NaN report: a 1, as on the host
    expected = mechanism.log_probability(outputs, inputs)
    # The law, independently: log of p₁, 1 − p₁, p₀ or 1 − p₀ per bit, summed (a few ulps).
    p1, p0 = mechanism.channel
    with np.errstate(divide="ignore"):
        table = np.log([[1.0 - p0, p0], [1.0 - p1, p1]])
    reference = table[(inputs != 0).astype(int), (outputs != 0).astype(int)].sum(axis=-1)
    assert np.allclose(expected, reference, rtol=1e-14, atol=0.0)
    assert np.array_equal(np.isneginf(expected), np.isneginf(reference))
    assert np.isneginf(expected).any() == (mechanism.epsilon == 700.0)
    spell = LIBRARIES[library]
    for got in (
        mechanism.log_probability(spell(outputs), spell(inputs)),
        mechanism.log_probability(spell(outputs.astype(np.bool_)), spell(inputs)),
        mechanism.log_probability(outputs, spell(inputs)),  # numpy: copied to the device
    ):
        assert type(got) is type(spell(outputs))
        assert got.dtype == (torch.float64 if library == "torch" else xs.float64)
        assert np.array_equal(_numpy(got), expected)  # the host's numbers, to the bit
    assert called == ["_device_bit_log_probability"] * 3
    one_bit = mechanism.log_probability(np.uint8(1), 0.0)  # 0-d: one bit, as on the host
    got = mechanism.log_probability(_scalar(library, 1, "uint8"), 0.0)
    assert one_bit.shape == tuple(got.shape) == () and np.array_equal(_numpy(got), one_bit)


@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("mechanism", COUNTS, ids=lambda m: m.name)
def test_the_device_scores_a_noisy_count_as_the_host_does(
    mechanism: Any, library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    called = device_reference.on_device(
        monkeypatch, [(graph_degree, "_device_count_log_probability")]
    )
    lists = _lists(mechanism.nodes)[:, None]
    window = mechanism.output_space()
    # Beyond the window, and 2⁵³ + 1, which int64 and float64 subtractions round apart.
    far = [window[0] - 5, window[-1] + 9, 2**53 + 1, 2**62]
    outputs = np.concatenate([window, far])[None]
    odd = np.array([0.5, -2.25, np.nan, np.inf, -np.inf, 1e300])[None]
    expected = mechanism.log_probability(outputs, lists)
    # The law, independently: ln((1 − α)/(1 + α)) − |y − C(min(d, D), k)|/t (a few ulps).
    degrees = np.count_nonzero(lists != 0, axis=-1)
    if mechanism is KSTAR:
        counts = np.vectorize(lambda d: math.comb(min(d, 3), 2))(degrees)
    else:
        counts = degrees
    t = float(mechanism.scale)
    alpha = math.exp(-1.0 / t)
    reference = math.log((1 - alpha) / (1 + alpha)) - np.abs(outputs - counts) / t
    assert np.allclose(expected, reference, rtol=1e-13, atol=0.0)
    spell = LIBRARIES[library]
    narrow = outputs.clip(-128, 127).astype(np.int8)  # int64 arithmetic on both paths
    for y in (outputs, narrow, outputs.astype(np.uint64), odd):  # uint64, floats: float64
        host = mechanism.log_probability(y, lists)
        for got in (
            mechanism.log_probability(spell(y), spell(lists)),
            mechanism.log_probability(y, spell(lists)),  # numpy: copied to the device
            mechanism.log_probability(spell(y), spell(lists.astype(np.bool_))),
        ):
            assert type(got) is type(spell(lists))
            assert got.dtype == (torch.float64 if library == "torch" else xs.float64)
            assert np.array_equal(_numpy(got), host, equal_nan=True)  # to the bit
    assert len(called) == 12
    one_bit = mechanism.log_probability(np.int64(3), 1.0)  # 0-d: a list of one bit
    got = mechanism.log_probability(_scalar(library, 3, "int64"), 1.0)
    assert one_bit.shape == tuple(got.shape) == () and np.array_equal(_numpy(got), one_bit)


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("mechanism", [GRAPH_RR, DEGREE], ids=lambda m: m.name)
def test_neighbour_list_scores_are_refused_as_on_the_host_dtypes_and_shapes_first(
    mechanism: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    lists = np.zeros((3, mechanism.nodes))
    outputs = np.zeros((2, 4))  # against (3, n) lists: no broadcast on either path
    error = IndexError if mechanism is GRAPH_RR else ValueError
    with pytest.raises(error):
        mechanism.log_probability(outputs, lists)
    with pytest.raises(error) as refused:
        mechanism.log_probability(torch.from_numpy(outputs), lists)
    assert not isinstance(refused.value, InvalidData)
    with pytest.raises(InvalidData, match="give both on one device") as refused:
        mechanism.log_probability(torch.zeros(3), xs.asarray(lists))
    assert refused.value.field == "inputs"
    if mechanism is DEGREE:  # the device reads real outputs only (the host casts complex)
        with pytest.raises(InvalidData) as refused:
            mechanism.log_probability(torch.zeros(3, dtype=torch.complex128), lists)
        assert refused.value.field == "outputs"
    monkeypatch.setattr(device_random, "index_dtype", lambda xp: xp.int32)
    with pytest.raises(InvalidData, match="log-probabilities are float64") as refused:
        mechanism.log_probability(torch.zeros(3), lists)
    assert refused.value.field == "outputs"


# The selections: a log-sum-exp (exponential), a quadrature of logarithms (permute-and-flip)
# and a segment expansion (report-noisy-max) of the utilities, with the device's exp, expm1,
# log, log1p and summation order: within the bound of ``device_reference``'s
# ``exponential_tolerance`` / ``permute_and_flip_tolerance`` / ``report_noisy_max_tolerance``
# on torch; on array-api-strict (numpy's operations) to the bit for the first two, whose sums
# run in numpy's order, and within the bound for report-noisy-max, whose sums run over every
# candidate with zeros where the host's run over a subset.
EXPONENTIAL = exponential.Exponential(epsilon=1.7, sensitivity=0.5)
PERMUTE_AND_FLIP = noisy_max.PermuteAndFlip(epsilon=0.9, sensitivity=2.0, monotone=True)
REPORT_NOISY_MAX = noisy_max.ReportNoisyMax(epsilon=1.3, sensitivity=0.7)
SELECTIONS: dict[Any, Callable[[Any], np.ndarray[Any, Any]]] = {
    EXPONENTIAL: lambda u: device_reference.exponential_tolerance(u, EXPONENTIAL.rate),
    PERMUTE_AND_FLIP: lambda u: device_reference.permute_and_flip_tolerance(
        u, PERMUTE_AND_FLIP.rate
    ),
    REPORT_NOISY_MAX: lambda u: _rnm_tolerance(np.asarray(u, dtype=np.float64).tobytes(), u.shape),
}


@functools.cache
def _rnm_tolerance(data: bytes, shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """``report_noisy_max_tolerance`` of the rows (a loop in Python), computed once per grid."""
    rows = np.frombuffer(data, dtype=np.float64).reshape(shape)
    return device_reference.report_noisy_max_tolerance(rows, REPORT_NOISY_MAX.scale)


def _selection_grid() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(outputs (k, 1), utility rows (R, m)): every index, indices outside 0..m−1 (−1, m, a
    fraction, NaN), and rows with −inf, large and tiny utilities and ties."""
    rng = np.random.default_rng(3)
    m = 9
    rows = rng.normal(size=(40, m)) * np.logspace(-3, 5, 40)[:, None]
    rows[0] = [-np.inf, 0.0, 0.0, 5.0, -np.inf, 1e-300, 3.0, 3.0, -1e300]
    rows[1, ::2] = -np.inf
    rows[2] = 7.0
    outputs = np.concatenate([np.arange(-1.0, m + 1.0), [0.5, np.nan]])[:, None]
    return outputs, rows


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("mechanism", SELECTIONS, ids=lambda m: m.name)
def test_a_selection_scores_every_index_as_the_host_within_its_bound(
    mechanism: Any, library: str
) -> None:
    outputs, rows = _selection_grid()
    host = mechanism.log_probability(outputs, rows)
    assert np.isneginf(host[-3:]).all() and np.isneginf(host[0]).all()  # out of range
    assert np.isneginf(host[1:, 0][[0, 4]]).all()  # −inf utilities
    spell = LIBRARIES[library]
    got = mechanism.log_probability(spell(outputs), spell(rows))
    assert type(got) is type(spell(rows)) and got.dtype == spell(host).dtype
    if library == "array-api-strict" and mechanism is not REPORT_NOISY_MAX:
        assert np.array_equal(_numpy(got), host)  # numpy's exp, log, log1p and sums
    else:
        tolerance = SELECTIONS[mechanism](rows)  # (R, m) per candidate
        index = np.clip(np.nan_to_num(outputs[:, 0]), 0, rows.shape[1] - 1).astype(int)
        device_reference.assert_selection_log_agrees(_numpy(got), host, tolerance[:, index].T)
        if library == "torch":  # torch's exp and log: not numpy's bits
            assert not np.array_equal(_numpy(got), host)


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("mechanism", SELECTIONS, ids=lambda m: m.name)
def test_a_selection_broadcasts_and_takes_numpy_and_list_operands(mechanism: Any) -> None:
    rows = np.array([[[0.0, 1.0, -np.inf]], [[2.0, 2.0, 9.0]]])  # batch shape (2, 1)
    outputs = np.array([[0, 1, 2, 1]])  # (1, 4) against (2, 1): (2, 4)
    host = mechanism.log_probability(outputs, rows)
    assert host.shape == (2, 4) and np.isneginf(host[0, 2])
    assert not np.array_equal(host[0], host[1])  # each row scored against its own utilities
    tolerance = np.max(SELECTIONS[mechanism](rows))
    for got in (
        mechanism.log_probability(torch.from_numpy(outputs), rows),
        mechanism.log_probability(outputs, torch.from_numpy(rows)),
        mechanism.log_probability(outputs.tolist(), torch.from_numpy(rows)),
    ):
        assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
        device_reference.assert_selection_log_agrees(got.numpy(), host, tolerance)
    wide = np.array([1, 2**64 - 1, 2**63, 2**53 + 1, 0], dtype=np.uint64)  # beyond int64
    got = mechanism.log_probability(torch.from_numpy(wide), torch.from_numpy(rows))
    host = mechanism.log_probability(wide, rows)
    assert np.isneginf(host[:, 1:4]).all()
    device_reference.assert_selection_log_agrees(got.numpy(), host, tolerance)
    with pytest.raises(ValueError):  # numpy's error for shapes that do not broadcast
        mechanism.log_probability(torch.zeros((3, 1), dtype=torch.int64), rows)


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("mechanism", SELECTIONS, ids=lambda m: m.name)
def test_a_selection_refuses_as_the_host_dtypes_and_shapes_before_any_value(
    mechanism: Any,
) -> None:
    def refusal(outputs: Any, inputs: Any) -> tuple[type[Exception], Any, str]:
        try:
            mechanism.log_probability(outputs, inputs)
        except (InvalidData, ValueError) as refused:
            return type(refused), getattr(refused, "field", None), str(refused)
        raise AssertionError("accepted")

    fine = np.array([[0.0, 1.0], [1.0, 2.0]])
    nan = np.array([[0.0, np.nan], [1.0, 2.0]])
    index = np.array([0, 1])
    for utilities in (  # the host's value refusals, naming inputs and quoting no value
        nan,
        np.array([[0.0, np.inf], [1.0, 2.0]]),
        np.array([[-np.inf, -np.inf], [1.0, 2.0]]),
        np.zeros((2, 0)),  # no candidate (a shape)
        np.array([[True, False]] * 2),  # booleans (a dtype)
    ):
        host = refusal(index, utilities)
        device = refusal(torch.from_numpy(index), torch.from_numpy(utilities))
        assert device[:2] == host[:2] == (InvalidData, "inputs")
        assert "nan" not in device[2].lower().replace("contain nan;", "")
    # dtypes and shapes of the outputs before the values of the inputs (the host reads them
    # after the values): a boolean index or a shape that does not broadcast beside a NaN
    boolean = np.array([True, False])
    assert refusal(boolean, fine)[:2] == (InvalidData, "outputs")
    assert refusal(torch.from_numpy(boolean), torch.from_numpy(nan))[:2] == (
        InvalidData,
        "outputs",
    )
    assert refusal(np.array([0, 1, 0]), fine)[0] is ValueError
    assert refusal(torch.tensor([0, 1, 0]), torch.from_numpy(nan))[0] is ValueError
    two = refusal(xs.asarray(index), torch.from_numpy(nan))
    assert two[:2] == (InvalidData, "inputs") and "give both on one device" in two[2]


def _hostile_rows(m: int) -> np.ndarray[Any, Any]:
    """Utility rows of m candidates (in utility units; the scale is about 1.08): random at
    scales 10⁻³ … 10⁶, ties, −inf, gaps from 10⁻³⁰⁰ up, a row of one finite candidate."""
    rng = np.random.default_rng(m)
    rows = rng.normal(size=(4, m)) * np.array([1e-3, 1.0, 30.0, 1e6])[:, None]
    rows[1, : (m + 1) // 2] = rows[1, 0]  # ties
    if m > 1:
        rows[2, ::3] = -np.inf  # −inf candidates
        rows[2, 1::3] = 2.0  # ties beside them
    gaps = np.array([0.0, 1e-300, 2e-300, -1e-300, 1e-12, 5.0, 5.0 + 1e-9, 40.0])
    tiny = np.resize(gaps, m)  # gaps from 10⁻³⁰⁰ to 40 scales, ties
    one = np.full(m, -np.inf)
    one[m // 2] = 3.0
    return np.concatenate([rows, tiny[None], one[None]])


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("library", LIBRARIES)
def test_report_noisy_max_scores_hostile_rows_within_the_bound(library: str) -> None:
    # m = 1 … 16 (the exact pmf's limit): the bound grows with the expansion's cancellation,
    # checked here, not tuned (measured: at most 0.07 of it on a random grid of 480 rows).
    spell, differs = LIBRARIES[library], False
    for m in range(1, 17):
        rows = _hostile_rows(m)
        host = REPORT_NOISY_MAX.log_probability(np.arange(m), rows[:, None, :])
        got = REPORT_NOISY_MAX.log_probability(spell(np.arange(m)), spell(rows[:, None, :]))
        assert type(got) is type(spell(rows)) and got.dtype == spell(host).dtype
        tolerance = SELECTIONS[REPORT_NOISY_MAX](rows)
        assert np.isfinite(tolerance).all()  # a claim on every row of this grid
        assert (tolerance[np.isfinite(host)] < 1e-6).all()
        device_reference.assert_selection_log_agrees(_numpy(got), host, tolerance)
        assert np.isneginf(host[-1]).sum() == m - 1 and host[-1, m // 2] == 0.0
        differs |= not np.array_equal(_numpy(got), host)
    # Gaps of 10³⁰⁰: the winner's near set is itself, so it scores 0 exactly on both sides;
    # the others' logarithms reach 10³⁰⁰, each side's roundings u times that, and the bound
    # claims nothing (+inf) for them; −inf exactly where the host's is, finite elsewhere.
    huge = np.array([[0.0, 1e300, -1e300, -np.inf, 2e300, 1.0]])
    host = REPORT_NOISY_MAX.log_probability(np.arange(6), huge)
    tolerance = SELECTIONS[REPORT_NOISY_MAX](huge)[0]
    assert np.isinf(tolerance[[0, 1, 2, 5]]).all() and tolerance[4] == 0.0
    got = _numpy(REPORT_NOISY_MAX.log_probability(spell(np.arange(6)), spell(huge)))
    device_reference.assert_selection_log_agrees(got, host, tolerance)
    assert got[4] == host[4] == 0.0
    assert differs  # not the host's bits: the bound, not equality, is what is checked


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("library", LIBRARIES)
def test_report_noisy_max_scores_rows_in_chunks_as_at_once(
    library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rows go a fixed number at a time on the device: 3 here, over a batch of 2 × 4 rows.
    rows = np.random.default_rng(6).normal(size=(2, 4, 5))
    rows[0, 1, 2] = -np.inf
    spell = LIBRARIES[library]
    whole = _numpy(REPORT_NOISY_MAX.log_probability(spell(np.arange(5)), spell(rows[..., None, :])))
    monkeypatch.setattr(noisy_max, "_RNM_DEVICE_ROWS", 3)
    chunked = REPORT_NOISY_MAX.log_probability(spell(np.arange(5)), spell(rows[..., None, :]))
    assert whole.shape == (2, 4, 5) and np.array_equal(_numpy(chunked), whole)


def test_report_noisy_max_bound_holds_per_side_against_an_exact_integration() -> None:
    # The bound is twice a per-side bound against the exact value; the host is one side, so
    # its distance from Pr[r] = ∫ f(y − v_r) ∏ F(y − v_j) dy, integrated independently at 30
    # digits over the segments between the utilities, must be within half the bound (the
    # tails beyond 80 scales of the utilities weigh below e^(−80)). Ties, a gap of 10⁻¹³.
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30
    v = np.array([0.0, 0.0, 1e-13, 2.0, -1.5])
    half = mp.mpf(1) / 2

    def integrand(y: Any, r: int) -> Any:
        out = half * mp.exp(-abs(y - v[r]))
        for j, x in enumerate(v):
            if j != r:
                z = y - mp.mpf(float(x))
                out *= half * mp.exp(z) if z < 0 else 1 - half * mp.exp(-z)
        return out

    points = [mp.mpf(float(x)) for x in sorted(set(v))]
    exact = np.array(
        [
            float(mp.log(mp.quad(lambda y, r=r: integrand(y, r), [-80, *points, 82])))
            for r in range(v.size)
        ]
    )
    host = noisy_max.report_noisy_max_log_pmf(v, 1.0)
    per_side = device_reference.report_noisy_max_tolerance(v, 1.0) / 2
    assert np.all(np.abs(host - exact) <= per_side)
    assert np.all(per_side < 1e-13)


@pytest.mark.usefixtures("on_device")
def test_report_noisy_max_refuses_more_than_sixteen_finite_candidates_as_the_host() -> None:
    # The count of finite candidates is read from the values, on the host and on the device;
    # the message quotes no count.
    rows = np.zeros((2, 18))
    rows[0, :2] = -np.inf  # 16 finite: scored
    index = np.array([0, 5])
    for outputs, inputs in (
        (index, rows[:1]),
        (torch.from_numpy(index), torch.from_numpy(rows[:1])),
    ):
        assert np.isfinite(np.asarray(REPORT_NOISY_MAX.log_probability(outputs, inputs))[1])
    for outputs, inputs in ((index, rows), (torch.from_numpy(index), torch.from_numpy(rows))):
        with pytest.raises(InvalidData, match="at most 16 finite candidates") as refused:
            REPORT_NOISY_MAX.log_probability(outputs, inputs)
        assert refused.value.field == "inputs" and "17" not in str(refused.value)
        assert "18" not in str(refused.value)


# cms and hcms: integer items hashed on the device with the host's keyed hash, scored with
# the host's constants in its order, so the host's numbers to the bit (at ε = 2 another
# association of (−ln k + D·ln φ) + (m − D)·ln(1 − φ) changes the last bit for some D).
CMS = count_mean_sketch.CountMeanSketch(epsilon=2.0, width=5, hashes=2, key="0123456789abcdef" * 2)
HCMS = count_mean_sketch.HadamardCountMeanSketch(
    epsilon=1.1, width=5, hashes=3, key="fedcba9876543210" * 2
)  # K = 8
# Hostile integers: negative, the extremes of int64, 2⁶² (each hashed as its decimal text).
SKETCH_ITEMS = np.array([0, 1, 7, -3, 2**62, -(2**63), 2**63 - 1, 12345], dtype=np.int64)


def _sketch_grid(mechanism: Any) -> np.ndarray[Any, Any]:
    """The whole output space, then reports scoring −inf on the host (a row index, column or
    bit out of range, a high word set, a bit beyond m)."""
    space = mechanism.output_space()
    if mechanism is CMS:
        bad = [[2, 1], [1 << 63, 1], [1 << 32, 0], [0, 1 << 5], [1, 1 << 63]]
    else:
        bad = [[3, 0, 0], [0, 8, 1], [0, 1, 2], [1 << 32, 0, 0], [0, 1 << 40, 0]]
    return np.concatenate([space, np.array(bad, dtype=np.uint64)])


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("mechanism", [CMS, HCMS], ids=lambda m: m.name)
def test_sketches_score_every_output_as_the_host_does(mechanism: Any, library: str) -> None:
    outputs = _sketch_grid(mechanism)
    expected = mechanism.log_probability(outputs[:, None, :], SKETCH_ITEMS)
    spell = LIBRARIES[library]
    for reports in (outputs, outputs.view(np.int64)):  # the device's uint64, or int64 bits
        got = mechanism.log_probability(spell(reports[:, None, :]), spell(SKETCH_ITEMS))
        assert type(got) is type(spell(SKETCH_ITEMS))
        assert got.dtype == (torch.float64 if library == "torch" else xs.float64)
        assert np.array_equal(_numpy(got), expected)  # to the bit
    space = mechanism.output_space().shape[0]
    assert np.isfinite(expected[:space]).all() and np.isneginf(expected[space:]).all()
    assert np.allclose(np.exp(expected[:space]).sum(axis=0), 1.0)  # a law for every item
    # A numpy operand is copied to the device; unsigned items below 2³² are integers too.
    small = SKETCH_ITEMS[:3].astype(np.uint32)
    got = mechanism.log_probability(outputs[:, None, :], spell(small))
    assert np.array_equal(_numpy(got), mechanism.log_probability(outputs[:, None, :], small))


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("mechanism", [CMS, HCMS], ids=lambda m: m.name)
def test_sketches_score_the_devices_own_reports_as_the_host_does(mechanism: Any) -> None:
    items = torch.from_numpy(SKETCH_ITEMS)
    reports = mechanism.randomize(items, rng=torch.Generator().manual_seed(3))
    assert reports.dtype == torch.uint64
    got = mechanism.log_probability(reports, items)
    expected = mechanism.log_probability(reports.numpy(), SKETCH_ITEMS)
    assert np.isfinite(expected).all() and np.array_equal(got.numpy(), expected)


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("mechanism", [CMS, HCMS], ids=lambda m: m.name)
def test_sketches_refuse_from_dtypes_and_shapes_naming_the_field(mechanism: Any) -> None:
    columns = mechanism.output_space().shape[1]
    reports = torch.zeros((2, columns), dtype=torch.int64)
    cases = [  # (outputs, inputs, field): the outputs' dtype and shape first, then the items'
        (reports.double(), torch.zeros(2, dtype=torch.float64), "outputs"),
        (torch.zeros((2, columns + 1), dtype=torch.int64), torch.zeros(2), "outputs"),
        (reports, torch.zeros(2, dtype=torch.float64), "inputs"),
        (reports, torch.zeros(2, dtype=torch.uint64), "inputs"),  # no int64 spelling above 2⁶³
        (reports, np.array(["a", "b"]), "inputs"),  # text: hash it on the host
    ]
    for outputs, inputs, field in cases:
        with pytest.raises(InvalidData) as refused:
            mechanism.log_probability(outputs, inputs)
        assert refused.value.field == field
    with pytest.raises(InvalidData, match="give both on one device") as refused:
        mechanism.log_probability(reports, xs.asarray(SKETCH_ITEMS[:2]))
    assert refused.value.field == "inputs"
    with pytest.raises(ValueError, match="broadcast"):  # numpy's error, before any value
        mechanism.log_probability(reports, torch.zeros(3, dtype=torch.int64))
    empty = np.zeros(0)  # an empty array of items of any dtype is accepted, as on the host
    assert mechanism.log_probability(reports[:1], torch.from_numpy(empty)).shape == (0,)
    assert mechanism.log_probability(reports[:1].numpy(), empty).shape == (0,)


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("library", LIBRARIES)
def test_a_wide_sketch_is_scored_word_by_word_as_the_host_does(library: str) -> None:
    wide = count_mean_sketch.CountMeanSketch(epsilon=2.0, width=100, hashes=3, key="ab" * 16)
    rng = np.random.default_rng(5)
    items = np.concatenate([SKETCH_ITEMS, rng.integers(-(2**40), 2**40, size=8)])
    honest = wide.randomize(items, rng=rng)  # the one-hot bit in either word, either half
    noise = rng.integers(0, 2**63, size=(6, 3), dtype=np.uint64) << np.uint64(1)
    noise[:, 0] %= np.uint64(3)
    noise[:, 2] &= np.uint64((1 << 36) - 1)
    noise[-1, 2] |= np.uint64(1 << 36)  # bit 100: beyond m
    outputs = np.concatenate([honest, noise])[:, None, :]
    expected = wide.log_probability(outputs, items)
    spell = LIBRARIES[library]
    assert np.array_equal(_numpy(wide.log_probability(spell(outputs), spell(items))), expected)
    assert np.isfinite(expected[:-1]).all() and np.isneginf(expected[-1]).all()
