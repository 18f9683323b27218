"""Every estimator with a device path (``accumulate`` in its ``device_methods``), on its
mechanism's reports through that path (torch tensors, array-api-strict and JAX arrays made to
take it, as a CUDA tensor would), in hostile layouts (a strided view, a narrower dtype): the
statistics are the numpy path's — counts exactly, float sums to rounding (a device may add in
another order: relative 1e-12 with at most a few hundred terms of magnitude ≤ 10⁶, far above
the n·2⁻⁵³ bound of a sum's reordering, Higham 2002, §4.2) — and reports spoiled with one
hostile value (NaN, ±∞, a negative, a fraction, an out-of-range or huge number) are either
refused with an ``InvalidData`` (naming the host's field where the host refuses too) or
accepted by the numpy path too, with the same statistics: a device never takes what the host
refuses, nor counts it differently.

Reports are the mechanism's own, drawn on the host from inputs of its declared domain (worst
cases included; text items too, whose reports are numbers), or a protocol's (the two-round
triangle protocol's releases, on a drawn graph).

False-positive rate: 0. Draws are seeded, the checks exact or within the rounding bound above,
Hypothesis derandomized.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from support import device_reference, jax_arrays  # noqa: E402

import dpkit  # noqa: E402
from dpkit.errors import InvalidData  # noqa: E402
from dpkit.testing.inputs import Unsupported, plan_inputs  # noqa: E402
from dpkit.testing.strategies import mechanisms, neighbouring_pairs  # noqa: E402

REGISTRY = dpkit.load_registry()
ACCUMULATING = [
    name
    for name, (factory, _) in REGISTRY.estimators.items()
    if "accumulate" in getattr(factory, "device_methods", ())
]
LAYOUTS = ("torch", "torch strided", "torch narrow", "array-api-strict", *jax_arrays.LAYOUTS)
HOSTILE = (math.nan, math.inf, -math.inf, -1.0, 0.5, 3.0, 2.0**40, 2.0**62)
SETTINGS = settings(
    max_examples=5,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _spelled(reports: np.ndarray[Any, Any], layout: str) -> Any:
    if layout == "torch strided":  # every other row of a tensor twice as long
        return torch.from_numpy(np.repeat(reports, 2, axis=0).copy())[::2]
    if layout == "torch narrow" and reports.dtype.kind in "iuf" and reports.dtype.itemsize == 8:
        narrow = reports.astype(np.int32 if reports.dtype.kind in "iu" else np.float32)
        if np.array_equal(narrow, reports):
            return torch.from_numpy(narrow)
    if layout == "array-api-strict":
        return xs.asarray(reports)
    if layout == "jax":
        return jax_arrays.asarray(reports)
    if reports.dtype == np.uint64:  # torch holds no uint64 arithmetic: spelled as int64 bits
        return torch.from_numpy(reports.view(np.int64).copy())
    return torch.from_numpy(reports.copy())


def _same(a: Any, b: Any) -> bool:
    """Field by field: integers and booleans exactly, floats to relative 1e-12."""
    if attrs.has(type(a)):
        return type(a) is type(b) and all(
            _same(getattr(a, f.name), getattr(b, f.name)) for f in attrs.fields(type(a))
        )
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray | np.generic | float | int) and not isinstance(a, bool):
        left, right = np.asarray(a), np.asarray(b)
        if left.shape != right.shape:
            return False
        if left.dtype.kind == "f" or right.dtype.kind == "f":
            return bool(np.allclose(left, right, rtol=1e-12, atol=0, equal_nan=True))
        return bool(np.array_equal(left, right))
    return bool(a == b)


def _protocol_reports(name: str, data: st.DataObject) -> tuple[Any, np.ndarray[Any, Any]]:
    """The releases of the two-round triangle protocol (no single mechanism: its estimator's
    input is round 2's n floats), on a drawn graph."""
    from dpkit_ldp.graph_triangles import TwoRoundTriangles

    assert name == "graph_triangles", f"{name}: draw its protocol's reports here"
    nodes = data.draw(st.integers(3, 9))
    epsilon1, epsilon2 = (data.draw(st.sampled_from((0.25, 1.0, 4.0))) for _ in range(2))
    protocol = TwoRoundTriangles(
        epsilon1=epsilon1,
        epsilon2=epsilon2,
        nodes=nodes,
        max_degree=data.draw(st.integers(2, nodes)),
        output="dense",
    )
    seed = data.draw(st.integers(0, 2**16))
    upper = np.triu(np.random.default_rng(seed).random((nodes, nodes)) < 0.5, 1)
    graph = (upper | upper.T).astype(np.int64)
    released = protocol.randomize_graph(graph, rng=np.random.default_rng(3))
    return REGISTRY.estimator(protocol), np.asarray(released.second)


def _reports(name: str, data: st.DataObject) -> tuple[Any, np.ndarray[Any, Any]]:
    if name not in REGISTRY.mechanisms:
        return _protocol_reports(name, data)
    mechanism = data.draw(mechanisms(REGISTRY.info(name).cls))
    try:
        plan = plan_inputs(mechanism, rng=np.random.default_rng(0))
    except Unsupported:
        pytest.skip(f"{name}: the auditor has no input plan for it")
    x, _ = data.draw(neighbouring_pairs(mechanism, plan))
    reports = mechanism.randomize(plan.batch(x, 9), rng=np.random.default_rng(3))
    if not isinstance(reports, np.ndarray) or reports.dtype.kind not in "biuf":
        pytest.skip(f"{name}: its reports are not one numeric array")
    return REGISTRY.estimator(mechanism), reports


@pytest.mark.parametrize("name", ACCUMULATING)
@SETTINGS
@given(data=st.data(), layout=st.sampled_from(LAYOUTS))
def test_device_statistics_are_the_hosts(
    name: str, data: st.DataObject, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    estimator, reports = _reports(name, data)
    host = estimator.accumulate(reports)
    device_reference.on_device(monkeypatch)
    got = estimator.accumulate(_spelled(reports, layout))
    assert _same(got, host), f"{layout}: the device's statistics differ from the host's"


@pytest.mark.parametrize("name", ACCUMULATING)
@SETTINGS
@given(data=st.data(), hostile=st.sampled_from(HOSTILE), layout=st.sampled_from(LAYOUTS))
def test_spoiled_reports_are_refused_or_counted_as_the_host_counts_them(
    name: str, data: st.DataObject, hostile: float, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    estimator, reports = _reports(name, data)
    integral = reports.dtype.kind in "biu" and math.isfinite(hostile) and hostile == int(hostile)
    spoiled = reports.astype(np.int64 if integral else np.float64)  # the value in its own kind
    spoiled.flat[data.draw(st.integers(0, spoiled.size - 1))] = hostile
    try:
        host: Any = estimator.accumulate(spoiled)
    except InvalidData as refused:
        host = refused
    device_reference.on_device(monkeypatch)
    try:
        got = estimator.accumulate(_spelled(spoiled, layout))
    except InvalidData as refused:
        if isinstance(host, InvalidData):
            assert refused.field == host.field
        return
    assert not isinstance(host, InvalidData), f"the device counted what the host refuses ({host})"
    assert _same(got, host), f"{layout}: the device counts spoiled reports differently"
