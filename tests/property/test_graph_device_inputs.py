"""Graphs on a device (torch tensors and array-api-strict arrays made to take the device path,
as a CUDA tensor would), on hostile inputs:

* the post-processing, ``dpkit.graph.propagate`` and ``label_distribution``: graphs with
  duplicate edges, both orientations and isolated nodes; values with NaN, ±∞, huge numbers,
  integer and boolean dtypes, strided views; reports out of range, negative, boolean or
  fractional;
* ``rr.randomize_graph`` in its four layouts (dense, packed, coo, csr): adjacencies of one or two
  bands of rows, in hostile dtypes, or spoiled (asymmetric, non-0/1, NaN, not square);
* the protocols' views on whole graphs, and ``randomize_graph`` of graph_rr, graph_arr,
  graph_degree, graph_kstar, the two-round triangle protocol and the one-round release, on the
  same adjacencies.

Either both the device and the numpy path refuse, with an ``InvalidData`` naming the same
field, or both answer — with equal results to rounding, or, for the layouts, each the dense
graph of the same key —: a device never takes what the host refuses, nor answers differently.

False-positive rate: 0 (no randomness; the tolerance is the rounding bound of
``tests/unit/graph/test_propagation.py``, 1e-9 relative here with values below 1e6 and
neighbourhoods below 10 nodes; Hypothesis derandomized).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from support import device_reference, jax_arrays  # noqa: E402

import dpkit  # noqa: E402
from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData  # noqa: E402

SETTINGS = settings(
    max_examples=40,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
HOSTILE = (math.nan, math.inf, -math.inf, 1e300, -1e6)


@st.composite
def graphs(draw: st.DrawFn) -> tuple[int, tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]:
    """n ≤ 8 nodes; edges as (sources, targets), duplicates and both orientations allowed."""
    n = draw(st.integers(1, 8))
    pairs = draw(
        st.lists(
            st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda e: e[0] != e[1]),
            max_size=16,
        )
    )
    sources = np.array([a for a, _ in pairs], dtype=np.int64)
    targets = np.array([b for _, b in pairs], dtype=np.int64)
    return n, (sources, targets)


def _spelled(array: np.ndarray[Any, Any], layout: str) -> Any:
    if layout == "torch strided":  # every other row of one twice as long
        return torch.from_numpy(np.repeat(array, 2, axis=0).copy())[::2]
    if layout == "torch":
        return torch.from_numpy(array.copy())
    if layout == "jax":
        return jax_arrays.asarray(array)
    return xs.asarray(array.copy())


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        return "answer", call()
    except InvalidData as refused:
        return "refused", refused.field


def _host(array: Any) -> np.ndarray[Any, Any]:
    return np.asarray(np.from_dlpack(array), dtype=np.float64)


def _same(device: tuple[str, Any], host: tuple[str, Any]) -> None:
    assert device[0] == host[0], (device, host)
    if device[0] == "refused":
        assert device[1] == host[1]
        return
    for found, expected in (
        (device[1].estimates, host[1].estimates),
        (device[1].variance, host[1].variance),
    ):
        np.testing.assert_allclose(_host(found), expected, rtol=1e-9, atol=1e-9)


LAYOUTS = st.sampled_from(["torch", "torch strided", "array-api-strict", *jax_arrays.LAYOUTS])
#: A graph, its layout, the steps and the neighbourhood; the values or reports are drawn inside.
PROPAGATION_CASES = given(
    graph=graphs(),
    data=st.data(),
    layout=LAYOUTS,
    steps=st.integers(0, 3),
    self_loops=st.booleans(),
)


@SETTINGS
@PROPAGATION_CASES
def test_propagate_on_the_device_answers_or_refuses_as_the_host(
    graph: Any, data: st.DataObject, layout: str, steps: int, self_loops: bool, monkeypatch: Any
) -> None:
    n, edges = graph
    dtype = data.draw(st.sampled_from([np.float64, np.float32, np.int32, np.bool_]))
    columns = data.draw(st.integers(1, 3))
    values = data.draw(st.lists(st.floats(-1e6, 1e6), min_size=n * columns, max_size=n * columns))
    x = np.array(values).reshape(n, columns)
    if data.draw(st.booleans()):  # one hostile value somewhere
        x[data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, columns - 1))] = data.draw(
            st.sampled_from(HOSTILE)
        )
    with np.errstate(invalid="ignore", over="ignore"):
        x = x.astype(dtype) if dtype is not np.bool_ else x > 0
    variance = data.draw(st.sampled_from([0.5, "per node", "per value", -1.0]))
    sigma2: Any = {"per node": np.full(n, 0.25), "per value": np.full(x.shape, 2.0)}.get(
        variance, variance
    )
    host = _outcome(
        lambda: dpkit.graph.propagate(edges, x, steps, variance=sigma2, self_loops=self_loops)
    )
    with monkeypatch.context() as patched:
        device_reference.on_device(patched)
        device = _outcome(
            lambda: dpkit.graph.propagate(
                edges, _spelled(x, layout), steps, variance=sigma2, self_loops=self_loops
            )
        )
    _same(device, host)


@SETTINGS
@PROPAGATION_CASES
def test_label_distribution_on_the_device_answers_or_refuses_as_the_host(
    graph: Any, data: st.DataObject, layout: str, steps: int, self_loops: bool, monkeypatch: Any
) -> None:
    n, edges = graph
    k = data.draw(st.integers(2, 5))
    krr = dpkit.mechanism("krr", epsilon=1.0, k=k)
    reports = np.array(data.draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)))
    if data.draw(st.booleans()):  # one hostile report
        reports[data.draw(st.integers(0, n - 1))] = data.draw(st.sampled_from([-1, k, 2**40]))
    spelled = data.draw(st.sampled_from(["int64", "int8", "bool", "float"]))
    if spelled == "int8":
        reports = reports.astype(np.int8) if np.all(np.abs(reports) < 128) else reports
    elif spelled == "bool":
        reports = reports.astype(bool)
    elif spelled == "float":
        reports = reports + 0.5
    host = _outcome(
        lambda: dpkit.graph.label_distribution(krr, edges, reports, steps, self_loops=self_loops)
    )
    with monkeypatch.context() as patched:
        device_reference.on_device(patched)
        device = _outcome(
            lambda: dpkit.graph.label_distribution(
                krr, edges, _spelled(reports, layout), steps, self_loops=self_loops
            )
        )
    _same(device, host)


#: How many nodes an adjacency has: one or two bands of 64 rows.
NODE_COUNTS = st.integers(0, 70)


@st.composite
def adjacencies(
    draw: st.DrawFn, sizes: st.SearchStrategy[int] = NODE_COUNTS
) -> np.ndarray[Any, Any]:
    """A symmetric 0/1 matrix of up to 70 nodes (bands of 64 rows: one or two), spelled in a
    hostile dtype, or spoiled: one asymmetric pair, a 2, a NaN, a −1, a non-square shape."""
    n = draw(sizes)
    seed = draw(st.integers(0, 2**32 - 1))
    upper = np.triu(np.random.default_rng(seed).random((n, n)) < 0.3, 1)
    matrix = (upper | upper.T).astype(np.float64)
    spoil = draw(st.sampled_from(["none", "none", "asymmetric", "two", "nan", "negative", "shape"]))
    if n >= 2 and spoil in ("asymmetric", "two", "nan", "negative"):
        value = {"asymmetric": 1.0 - matrix[0, 1], "two": 2.0, "nan": math.nan, "negative": -1.0}
        matrix[0, 1] = value[spoil]
    elif spoil == "shape" and n >= 1:
        matrix = matrix[:, :-1]
    dtype = draw(st.sampled_from(["float64", "uint8", "bool", "int32"]))
    if dtype == "float64" or not np.all(np.isfinite(matrix)):
        return matrix
    return matrix.astype(dtype) if dtype != "bool" else matrix != 0


@SETTINGS
@given(
    adjacency=adjacencies(),
    layout=LAYOUTS,
    output=st.sampled_from(["dense", "packed", "coo", "csr"]),
)
def test_graph_layouts_on_the_device_answer_or_refuse_as_the_host(
    adjacency: np.ndarray[Any, Any], layout: str, output: str, monkeypatch: Any
) -> None:
    """Refused on the device iff on the host (the same field); answered, the layout is the
    dense graph of the same key: packed unpacks to it, coo is its upper triangle."""
    rr = dpkit.mechanism("rr", epsilon=1.0)
    key = bytes(range(32))
    host = _outcome(
        lambda: rr.randomize_graph(adjacency, output=output, rng=np.random.default_rng(1))
    )
    with monkeypatch.context() as patched:
        device_reference.on_device(patched)
        spelled = _spelled(adjacency, layout)
        found = _outcome(
            lambda: rr.randomize_graph(spelled, output=output, rng=SecureRandom.from_key(key))
        )
        if found[0] == "answer":
            dense = rr.randomize_graph(spelled, rng=SecureRandom.from_key(key))
    assert found[0] == host[0], (found, host)
    if found[0] == "refused":
        assert found[1] == host[1]
        return
    n = adjacency.shape[0]
    truth = np.asarray(np.from_dlpack(dense)) != 0
    if output == "packed":
        unpacked = np.unpackbits(np.from_dlpack(found[1]), axis=1, count=n).astype(bool)
        assert np.array_equal(unpacked, truth)
    elif output == "coo":
        rows, cols = (np.from_dlpack(part) for part in found[1])
        expected = np.nonzero(np.triu(truth, 1))
        assert np.array_equal(rows, expected[0]) and np.array_equal(cols, expected[1])
    elif output == "csr":
        indptr, indices = (np.from_dlpack(part) for part in found[1])
        assert indptr.shape == (n + 1,) and indptr[-1] == indices.size
        for i in range(n):
            assert np.array_equal(indices[indptr[i] : indptr[i + 1]], np.flatnonzero(truth[i]))
    assert np.array_equal(truth, truth.T) and not np.any(np.diag(truth))


def _views(n: int) -> list[Any]:
    """The protocols' views on whole n-node graphs: graph_rr's ("once"), graph_arr's ("both")
    and the two-round triangle protocol's (D = 2: the projection drops neighbours)."""
    from dpkit_ldp.graph_triangles import TwoRoundTriangles

    return [
        dpkit.mechanism("graph_rr", epsilon=1.0, nodes=n).on_graphs(),
        dpkit.mechanism("graph_arr", epsilon=1.0, nodes=n, mu=0.4, pairs="both").on_graphs(),
        TwoRoundTriangles(epsilon1=1.0, epsilon2=1.0, nodes=n, max_degree=2).on_graphs(),
    ]


@SETTINGS
@given(adjacency=adjacencies(), layout=LAYOUTS, view=st.integers(0, 2), batch=st.booleans())
def test_graph_views_on_the_device_answer_or_refuse_as_the_host(
    adjacency: np.ndarray[Any, Any], layout: str, view: int, batch: bool, monkeypatch: Any
) -> None:
    """The protocols' views on hostile adjacencies (alone or as a batch of two): refused on
    the device iff on the host (the same field); answered, the device's output has the host's
    shape and is an output the view can give (bits, and releases on the lattice)."""
    n = max(adjacency.shape[0], 2)
    mechanism = _views(n)[view]
    graphs = np.stack([adjacency, adjacency]) if batch else adjacency
    host = _outcome(lambda: mechanism.randomize(graphs, rng=np.random.default_rng(1)))
    with monkeypatch.context() as patched:
        device_reference.on_device(patched)
        spelled = _spelled(graphs, layout)
        found = _outcome(lambda: mechanism.randomize(spelled, rng=SecureRandom.from_key(b"k" * 32)))
    assert found[0] == host[0], (found, host)
    if found[0] == "refused":
        assert found[1] == host[1]
        return
    got, expected = _host(found[1]), np.asarray(host[1], dtype=np.float64)
    assert got.shape == expected.shape
    pairs = got.shape[-1] - (n if view == 2 else 0)
    assert np.all((got[..., :pairs] == 0) | (got[..., :pairs] == 1))
    if view == 2:
        steps = got[..., pairs:] / mechanism.protocol.step
        assert np.array_equal(steps, np.round(steps))


def _graph_mechanism(n: int, which: int) -> Any:
    """A mechanism whose ``randomize_graph`` takes a device adjacency: graph_rr ("once",
    packed), graph_arr ("both", sparse), graph_degree, graph_kstar (D = 2), the two-round
    triangle protocol (D = 2, dense) or the one-round release."""
    from dpkit_ldp import graph_arr, graph_degree, graph_rr
    from dpkit_ldp.graph_one_round import OneRoundGraph
    from dpkit_ldp.graph_triangles import TwoRoundTriangles

    if which == 4:
        return TwoRoundTriangles(epsilon1=1.0, epsilon2=1.0, nodes=n, max_degree=2, output="dense")
    if which == 5:
        return OneRoundGraph(epsilon1=1.0, epsilon2=1.0, nodes=n)
    if which == 0:
        return graph_rr.GraphRandomizedResponse(epsilon=1.0, nodes=n, output="packed")
    if which == 1:
        return graph_arr.AsymmetricRandomizedResponse(
            epsilon=1.0, nodes=n, mu=0.4, pairs="both", output="sparse"
        )
    if which == 2:
        return graph_degree.NoisyDegree(epsilon=1.0, nodes=n)
    return graph_degree.LocalKStars(epsilon=1.0, nodes=n, max_degree=2)


#: A 9-node graph every mechanism answers on (the explicit examples: each mechanism at least
#: once on a graph it takes).
NINE = np.triu(np.random.default_rng(9).random((9, 9)) < 0.5, 1)
NINE = (NINE | NINE.T).astype(np.int64)
#: It with one asymmetric pair, and with a self-loop: refused by both paths.
ASYMMETRIC, LOOP = NINE.copy(), NINE.copy()
ASYMMETRIC[0, 1] = 1 - ASYMMETRIC[1, 0]
LOOP[4, 4] = 1


@SETTINGS
@example(adjacency=NINE, layout="torch", which=4)
@example(adjacency=NINE, layout="array-api-strict", which=5)
@example(adjacency=NINE.astype(bool), layout="torch strided", which=1)
@example(adjacency=ASYMMETRIC, layout="array-api-strict", which=2)
@example(adjacency=LOOP.astype(np.float32), layout="torch", which=0)
@given(
    adjacency=adjacencies(sizes=st.sampled_from([0, 9])),  # JAX compiles each new shape
    layout=LAYOUTS,
    which=st.integers(0, 5),
)
def test_randomize_graph_on_the_device_answers_or_refuses_as_the_host(
    adjacency: np.ndarray[Any, Any], layout: str, which: int, monkeypatch: Any
) -> None:
    """Refused on the device iff on the host (the same field), before a word is drawn;
    answered, the device's reports have the host's encoding and shape, report only the
    reported pairs (graph_rr's and the two rounds': the host's reports on the same words) or
    are integers (the counts), and the estimators take them."""
    n = max(adjacency.shape[0], 2)
    mechanism = _graph_mechanism(n, which)
    if which >= 4 and layout == "jax":  # their new device code is the others' (JAX's compile
        layout = "torch"  # time is per shape); the two rounds' JAX path: the views' test
    host = _outcome(lambda: mechanism.randomize_graph(adjacency, rng=np.random.default_rng(1)))
    with monkeypatch.context() as patched:
        from dpkit.tensors import graph_views

        calls = device_reference.recording_calls(patched, graph_views)
        spelled = _spelled(adjacency, layout)
        found = _outcome(
            lambda: mechanism.randomize_graph(spelled, rng=SecureRandom.from_key(b"g" * 32))
        )
        assert found[0] == host[0], (found, host)
        assert found[0] == "answer" or not any(call.taken for call in calls)  # none drawn
        if found[0] == "refused":
            assert found[1] == host[1]
            return
        got, expected = found[1], host[1]
        if which == 4:  # two rounds: the host's reports on the same words
            words = device_reference.replaying(calls[-1].words64())
            again = mechanism.randomize_graph(adjacency, rng=words)
            assert np.array_equal(got.first.dense(), again.first.dense())
            assert np.array_equal(_host(got.second), again.second)
            assert np.isfinite(dpkit.graph.triangles(mechanism, got).value)
            return
        if which == 5:  # one round: both parts, and the estimators take them
            assert got.adjacency.dense().shape == (n, n)
            assert _host(got.degrees).shape == (n,)
            assert np.isfinite(dpkit.graph.kstars(mechanism, got).value)
            return
        if which >= 2:  # noisy counts: int64, one per node
            assert _host(got).shape == expected.shape == (n,)
            assert np.asarray(np.from_dlpack(got)).dtype == np.int64
            estimate = dpkit.graph.kstars if which == 3 else dpkit.graph.degrees
            assert (
                estimate(mechanism, got).estimates.shape
                == estimate(mechanism, expected).estimates.shape
            )
            return
        assert (got.encoding, got.nodes, got.pairs) == (expected.encoding, n, expected.pairs)
        assert got.library is not None  # kept on the device
        dense = got.dense()
        assert dense.shape == expected.dense().shape == (n, n)
        reported = (
            np.tril(np.ones((n, n), dtype=bool), -1) if which == 0 else ~np.eye(n, dtype=bool)
        )
        assert not np.any(dense & ~reported)
        assert got.ones() == int(dense.sum())
        if which == 0:  # packed: the host's reports on the device's words
            words = device_reference.replaying(calls[-1].words64())
            assert np.array_equal(dense, mechanism.randomize_graph(adjacency, rng=words).dense())
        assert np.isfinite(dpkit.graph.edge_count(mechanism, got).value)
