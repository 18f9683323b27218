"""``log_probability`` of the heavy-hitter and RAPPOR telemetry on the device path, run on the CPU
(torch tensors and array-api-strict arrays treated as an accelerator's).

pem and treehist select among constants computed on the host (log p* or the other value's;
log(1 − φ) or log φ of each part) by the host's hash or parities of the same prefixes, added in
the host's order: the host's numbers to the bit, over every report of a tiny TreeHist, drawn and
spoiled reports (a round or level out of range, a high word set, a y ≥ g′ or ≥ 2, an r beyond
its prefix) and items at the ends of 64 bits. rappor's log-probability is a ``logaddexp`` per
bit summed over the k bits, by one namespace-generic formula for both paths: on torch within
``support.device_reference.sum_of_logaddexp_bound`` of the host's, on array-api-strict (numpy's
functions) to the bit, −inf exactly where the host's is (a cohort ≥ m, T reports naming two
cohorts, bits set beyond k). The results are the caller's array type, float64, broadcast as on
the host; numpy or list operands are copied to the device; the host's refusals name the same
field, the dtypes and shapes decided before any value is read.

False-positive rate: 0. Every draw is seeded, every check exact or a derived bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from dpkit_ldp import pem, rappor, treehist  # noqa: E402
from support import device_reference  # noqa: E402

from dpkit.errors import InvalidData  # noqa: E402

LIBRARIES: dict[str, Callable[[np.ndarray[Any, Any]], Any]] = {
    "torch": lambda a: torch.from_numpy(np.ascontiguousarray(a)),
    "array-api-strict": xs.asarray,
}

PEM_SMALL = pem.PrefixExtendingMethod(epsilon=1.2, bits=4, top=1, step=2)  # s = (2, 4), g′ = 4
PEM_WIDE = pem.PrefixExtendingMethod(epsilon=2.5, bits=64, top=5, step=16)  # s = 19 … 64
TREE_SMALL = treehist.TreeHist(epsilon=1.3, bits=3, top=1, step=2)  # s = (2, 3): 384 reports
TREE_WIDE = treehist.TreeHist(epsilon=2.0, bits=64, top=3, step=16, split=0.3)  # s = 16 … 64
PREFIXES = [PEM_SMALL, PEM_WIDE, TREE_SMALL, TREE_WIDE]
#: 64-bit items at the ends (as uint64: 2⁶⁴ − 1 has no int64 spelling).
WIDE_ITEMS = np.array(
    [0, 1, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1, 0x0123456789ABCDEF], dtype=np.uint64
)

RAPPOR_SMALL = rappor.Rappor(bits=3, hashes=2, cohorts=2, p=0.25, q=0.75, key="5a" * 16)
RAPPOR_T = rappor.Rappor(bits=2, hashes=1, cohorts=2, reports=2, key="c3" * 16)
RAPPOR_F0 = rappor.Rappor(bits=5, hashes=1, cohorts=1, f=0.0, p=0.1, q=0.9, key="77" * 16)
RAPPOR_WIDE = rappor.Rappor(bits=70, hashes=2, cohorts=3, f=0.3, key="ab" * 16)  # padding bits
RAPPORS = [RAPPOR_SMALL, RAPPOR_T, RAPPOR_F0, RAPPOR_WIDE]
#: Hostile integer items: negative, int64's ends (each hashed as its decimal text).
RAPPOR_ITEMS = np.array([0, 1, 7, -3, 2**62, -(2**63), 2**63 - 1, 12345], dtype=np.int64)


@pytest.fixture
def on_device(monkeypatch: pytest.MonkeyPatch) -> None:
    device_reference.on_device(monkeypatch)


def _numpy(value: Any) -> np.ndarray[Any, Any]:
    return value.numpy() if isinstance(value, torch.Tensor) else np.from_dlpack(value)


def _items(mechanism: Any) -> np.ndarray[Any, Any]:
    if mechanism.bits == 64:
        return WIDE_ITEMS
    return np.arange(1 << mechanism.bits, dtype=np.int64)


def _prefix_grid(mechanism: Any) -> tuple[np.ndarray[Any, Any], int]:
    """(reports, how many the host scores finite first): every report of a tiny TreeHist, or
    reports drawn from every item; then spoiled ones, each −inf on the host."""
    rng = np.random.default_rng(7)
    if mechanism is TREE_SMALL:
        honest = mechanism.output_space()
    else:
        honest = mechanism.randomize(np.repeat(_items(mechanism), 6), rng=rng)
    first = int(np.flatnonzero(honest[:, 0] == 0)[0])  # a report of round (level) 0
    spoiled = np.repeat(honest[first : first + 1], 6, axis=0)
    high = np.uint64(1 << 40)
    if isinstance(mechanism, pem.PrefixExtendingMethod):
        spoiled[0, 0] = mechanism.groups  # a round out of range
        spoiled[1, 0] |= high  # its high word set
        spoiled[2, 4] = mechanism.range  # y ≥ g′
        spoiled[3, 4] |= high
        spoiled[4, 4] = np.uint64(2**64 - 1)  # −1 as int64
        spoiled[5, 0] = np.uint64(2**63)
    else:
        spoiled[0, 0] = mechanism.levels
        spoiled[1, 2] = 2  # y not a bit
        spoiled[2, 4] |= high  # y′ not a bit
        spoiled[3, 1] |= np.uint64(1 << mechanism.prefix_bits[0])  # r beyond its prefix
        spoiled[4, 3] = np.uint64(2**64 - 1)  # r′ beyond L bits (or y′ at L = 64: see below)
        spoiled[5, 0] |= high
        if mechanism.bits == 64:
            spoiled[4, 4] = 7  # r′ spans 64 bits: spoil y′ instead
    return np.concatenate([honest, spoiled]), honest.shape[0]


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("mechanism", PREFIXES, ids=lambda m: f"{m.name}-{m.bits}")
def test_prefix_reports_are_scored_as_the_host_does_to_the_bit(
    mechanism: Any, library: str
) -> None:
    outputs, finite = _prefix_grid(mechanism)
    items = _items(mechanism)
    expected = mechanism.log_probability(outputs[:, None, :], items)
    assert np.isfinite(expected[:finite]).any() and np.isneginf(expected[finite:]).all()
    assert not np.isnan(expected).any()
    spell = LIBRARIES[library]
    for reports in (outputs, outputs.view(np.int64)):  # the device's uint64, or int64 bits
        got = mechanism.log_probability(spell(reports[:, None, :]), spell(items))
        assert type(got) is type(spell(items))
        assert got.dtype == (torch.float64 if library == "torch" else xs.float64)
        assert np.array_equal(_numpy(got), expected)  # to the bit
    if mechanism is TREE_SMALL:  # a law for every item: the host's numbers sum to 1
        assert np.allclose(np.exp(expected[:finite]).sum(axis=0), 1.0)


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("mechanism", PREFIXES, ids=lambda m: f"{m.name}-{m.bits}")
def test_prefix_reports_of_the_device_are_scored_there_as_on_the_host(mechanism: Any) -> None:
    items = _items(mechanism)
    spelled = torch.from_numpy(items)
    reports = mechanism.randomize(spelled, rng=torch.Generator().manual_seed(3))
    got = mechanism.log_probability(reports, spelled)
    expected = mechanism.log_probability(reports.view(torch.int64).numpy(), items)
    assert np.isfinite(expected).all() and np.array_equal(got.numpy(), expected)
    # Operands broadcast as on the host, a numpy or list operand copied to the device.
    outputs = reports.view(torch.int64).numpy()[:3, None, :]
    grid = items[:4].reshape(2, 1, 1, 2)
    host = mechanism.log_probability(outputs, grid)
    assert host.shape == (2, 1, 3, 2)
    for got in (
        mechanism.log_probability(torch.from_numpy(outputs), torch.from_numpy(grid)),
        mechanism.log_probability(outputs, torch.from_numpy(grid)),
        mechanism.log_probability(outputs.tolist(), torch.from_numpy(grid)),
        mechanism.log_probability(torch.from_numpy(outputs), grid),
        mechanism.log_probability(torch.from_numpy(outputs), grid.astype(np.int64).tolist()),
    ):
        assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
        assert np.array_equal(got.numpy(), host)


def _refusal(mechanism: Any, outputs: Any, inputs: Any) -> tuple[type[Exception], Any, str]:
    try:
        mechanism.log_probability(outputs, inputs)
    except (InvalidData, ValueError) as refused:
        return type(refused), getattr(refused, "field", None), str(refused)
    raise AssertionError("accepted")


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("mechanism", [PEM_SMALL, TREE_SMALL], ids=lambda m: m.name)
def test_prefix_scores_refuse_as_the_host_dtypes_and_shapes_before_any_value(
    mechanism: Any,
) -> None:
    reports = torch.zeros((2, 5), dtype=torch.int64)
    outside = torch.tensor([3, 1 << mechanism.bits])  # an item beyond L bits (a value)
    host = _refusal(mechanism, np.zeros((2, 5), dtype=np.uint64), outside.numpy())
    device = _refusal(mechanism, reports, outside)
    assert device[:2] == host[:2] == (InvalidData, "inputs")
    assert str(1 << mechanism.bits) not in device[2].replace(str((1 << mechanism.bits) - 1), "")
    for outputs, inputs, field in [  # the dtypes and shapes first, beside the value above
        (reports.double(), outside, "outputs"),  # the host casts floats: reports are integers
        (torch.zeros((2, 6), dtype=torch.int64), outside, "outputs"),  # not (…, 5)
        (torch.zeros((2, 1), dtype=torch.int64), outside, "outputs"),  # the host broadcasts it
        (reports, torch.tensor([0.0, 1.0]), "inputs"),
        (reports, torch.tensor([0.0, 1.0, 2.0]), "inputs"),  # the dtype before the broadcast
        (reports, torch.tensor([True, False]), "inputs"),
        (reports, np.array(["a", "b"]), "inputs"),  # text: encode it on the host
    ]:
        assert _refusal(mechanism, outputs, inputs)[:2] == (InvalidData, field)
    assert _refusal(mechanism, reports, torch.tensor([1, 2, 3 << 60]))[0] is ValueError
    two = _refusal(mechanism, reports, xs.asarray(np.array([0, 1])))
    assert two[:2] == (InvalidData, "inputs") and "give both on one device" in two[2]
    # An empty array of items of any dtype is accepted, as on the host.
    for empty in (np.zeros(0), np.zeros(0, dtype=np.int64)):
        got = mechanism.log_probability(reports[:1], torch.from_numpy(empty))
        assert got.shape == (0,) and got.dtype == torch.float64
        assert mechanism.log_probability(np.zeros((1, 5), dtype=np.uint64), empty).shape == (0,)


# -- rappor ------------------------------------------------------------------------------------


def _rappor_grid(mechanism: Any) -> tuple[np.ndarray[Any, Any], int]:
    """(reports, how many the host scores finite first): the whole output space, or reports
    drawn from every item with random bits beside them; then spoiled ones (−inf on the host)."""
    rng = np.random.default_rng(11)
    if mechanism is RAPPOR_WIDE:
        drawn = mechanism.randomize(np.repeat(RAPPOR_ITEMS, 4), rng=rng)
        noise = rng.integers(0, 2**63, size=(8, 3), dtype=np.uint64) << np.uint64(1)
        noise[:, 0] %= np.uint64(mechanism.cohorts)
        noise[:, 2] &= np.uint64((1 << 6) - 1)
        honest = np.concatenate([drawn, noise])
    else:
        honest = mechanism.output_space()
    spoiled = np.repeat(honest[:1], 3, axis=0)
    first = spoiled[..., 0] if mechanism.reports == 1 else spoiled[:, 0, 0]
    first[0] = mechanism.cohorts  # a cohort out of range
    first[1] |= np.uint64(1 << 32)  # its high word set
    if mechanism.reports > 1:
        spoiled[2, 1, 0] = (spoiled[2, 0, 0] + np.uint64(1)) % np.uint64(mechanism.cohorts)
    else:
        spoiled[2, -1] |= np.uint64(1 << (mechanism.bits % 64))  # a bit beyond k
    return np.concatenate([honest, spoiled]), honest.shape[0]


def _bound_check(got: Any, expected: Any, mechanism: Any, library: str) -> None:
    if library == "torch":
        device_reference.assert_sum_of_logaddexp_agrees(
            _numpy(got), expected, terms=mechanism.bits, constant=math.log(mechanism.cohorts)
        )
    else:  # array-api-strict's logaddexp and sum are numpy's: the host's numbers
        assert np.array_equal(_numpy(got), expected)


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("mechanism", RAPPORS, ids=lambda m: f"k{m.bits}-T{m.reports}-f{m.f:g}")
def test_rappor_reports_are_scored_as_the_host_within_the_bound(
    mechanism: Any, library: str
) -> None:
    outputs, finite = _rappor_grid(mechanism)
    width = outputs.shape[1:]
    grid = outputs.reshape(-1, 1, *width)
    expected = mechanism.log_probability(grid, RAPPOR_ITEMS)
    assert np.isfinite(expected[:finite]).all() and np.isneginf(expected[finite:]).all()
    if mechanism is not RAPPOR_WIDE:  # a law for every item
        assert np.allclose(np.exp(expected[:finite]).sum(axis=0), 1.0)
    spell = LIBRARIES[library]
    for reports in (grid, grid.view(np.int64)):
        got = mechanism.log_probability(spell(reports), spell(RAPPOR_ITEMS))
        assert type(got) is type(spell(RAPPOR_ITEMS))
        assert got.dtype == (torch.float64 if library == "torch" else xs.float64)
        _bound_check(got, expected, mechanism, library)
    bound = device_reference.sum_of_logaddexp_bound(
        expected[:finite], terms=mechanism.bits, constant=math.log(mechanism.cohorts)
    )
    assert bound.max() < 1e-11  # a few thousand units of 2⁻⁵², not a vacuous bound


@pytest.mark.usefixtures("on_device")
@pytest.mark.parametrize("mechanism", [RAPPOR_T, RAPPOR_WIDE], ids=lambda m: f"k{m.bits}")
def test_rappor_reports_of_the_device_are_scored_there_and_broadcast(mechanism: Any) -> None:
    spelled = torch.from_numpy(RAPPOR_ITEMS)
    reports = mechanism.randomize(spelled, rng=torch.Generator().manual_seed(5))
    got = mechanism.log_probability(reports, spelled)
    expected = mechanism.log_probability(reports.view(torch.int64).numpy(), RAPPOR_ITEMS)
    assert np.isfinite(expected).all()
    _bound_check(got, expected, mechanism, "torch")
    width = tuple(reports.shape[1:])
    outputs = reports.view(torch.int64).numpy()[:3].reshape(3, 1, *width)
    items = RAPPOR_ITEMS[:4].reshape(2, 1, 1, 2)
    host = mechanism.log_probability(outputs, items)
    assert host.shape == (2, 1, 3, 2)
    for got in (
        mechanism.log_probability(torch.from_numpy(outputs), torch.from_numpy(items)),
        mechanism.log_probability(outputs, torch.from_numpy(items)),
        mechanism.log_probability(outputs.tolist(), torch.from_numpy(items)),
        mechanism.log_probability(torch.from_numpy(outputs), items.tolist()),
    ):
        assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
        _bound_check(got, host, mechanism, "torch")


@pytest.mark.usefixtures("on_device")
def test_rappor_scores_refuse_as_the_host_dtypes_and_shapes_first() -> None:
    for mechanism in (RAPPOR_SMALL, RAPPOR_T):
        width = (2,) if mechanism.reports == 1 else (2, 2)
        reports = torch.zeros((3, *width), dtype=torch.int64)
        items = torch.zeros(3, dtype=torch.int64)
        cases = [  # (outputs, inputs, field): the outputs' dtype and shape, then the items'
            (reports.double(), items.double(), "outputs"),
            (torch.zeros((3, 3), dtype=torch.int64), items, "outputs"),  # not 1 + ⌈k/64⌉ words
            (reports, items.double(), "inputs"),
            (reports, torch.zeros(2, dtype=torch.float64), "inputs"),  # before the broadcast
            (reports, torch.zeros(3, dtype=torch.uint64), "inputs"),  # no int64 spelling
            (reports, np.array(["a", "b", "c"]), "inputs"),  # text: hash it on the host
        ]
        if mechanism.reports > 1:
            cases.append((torch.zeros((3, 3, 2), dtype=torch.int64), items, "outputs"))  # T = 3
            cases.append((torch.zeros(2, dtype=torch.int64), items, "outputs"))  # no T axis
        for outputs, inputs, field in cases:
            assert _refusal(mechanism, outputs, inputs)[:2] == (InvalidData, field)
        assert _refusal(mechanism, reports, torch.zeros(2, dtype=torch.int64))[0] is ValueError
        two = _refusal(mechanism, reports, xs.asarray(RAPPOR_ITEMS[:3]))
        assert two[:2] == (InvalidData, "inputs") and "give both on one device" in two[2]
        empty = np.zeros(0)  # an empty array of items of any dtype, accepted as on the host
        got = mechanism.log_probability(reports[:1], torch.from_numpy(empty))
        assert got.shape == (0,) and got.dtype == torch.float64
        assert mechanism.log_probability(reports[:1].numpy(), empty).shape == (0,)


def test_the_logaddexp_bound_is_its_first_order_form() -> None:
    # 12k·u + (2k + 2)u·A + 2u·c to first order, A ≈ |T| − c: the bound evaluated at a few
    # totals is that within a relative 10⁻⁶ (it grows with A, never below 12k·u).
    u, k, c = 2.0**-53, 70, math.log(3.0)
    totals = np.array([-c, -10.0, -100.0, -1000.0])
    bound = device_reference.sum_of_logaddexp_bound(totals, terms=k, constant=c)
    a = np.abs(totals) - c
    first = 12 * k * u + (2 * k + 2) * u * a + 2 * u * c
    assert np.allclose(bound, first, rtol=1e-6, atol=0)
