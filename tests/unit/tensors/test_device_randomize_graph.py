"""``randomize_graph`` of the graph mechanisms on an accelerator's adjacency, run on the CPU
(torch tensors and array-api-strict arrays made to take the device path).

graph_rr and graph_arr: the dense and packed reports are the host's on the same 64-bit words
(the dense encoding's row-major order), the sparse ones the coordinates of the dense reports'
1s; in fast mode the reports are the whole-graph view's on the same generator (whose law
``test_device_graph_views.py`` tests), and in both modes the reported 1s among the edges and
among the non-edges of a 120-node graph have the channel's binomial laws. graph_degree and
graph_kstar: the counts are the host's, the noise that of ``randomize`` on the adjacency's
rows on the same words, in both modes. The reports keep the caller's type; the host's refusals
of a graph (same field, no value quoted, nothing drawn); the estimators take the device's
output and give what they give on the host copy.

Binomial tests below: each refuses a correct law with probability at most ALPHA = 1e-6."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from dpkit_ldp import graph_arr, graph_degree, graph_rr  # noqa: E402
from dpkit_ldp.graph_one_round import OneRoundGraph, OneRoundReports  # noqa: E402
from dpkit_ldp.graph_reports import AdjacencyReports  # noqa: E402
from dpkit_ldp.graph_triangles import TwoRoundReports, TwoRoundTriangles  # noqa: E402
from support import device_reference  # noqa: E402

import dpkit  # noqa: E402
from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData, InvalidParameter  # noqa: E402
from dpkit.tensors import graph_views  # noqa: E402

ALPHA = 1e-6
KEY = bytes(range(32))
NODES = 9
RR = graph_rr.GraphRandomizedResponse(epsilon=1.0, nodes=NODES)
ARR_BOTH = graph_arr.AsymmetricRandomizedResponse(epsilon=1.0, nodes=NODES, mu=0.3, pairs="both")
DEGREE = graph_degree.NoisyDegree(epsilon=1.0, nodes=NODES)
KSTAR = graph_degree.LocalKStars(epsilon=2.0, nodes=NODES, max_degree=3, k=2)
#: D = 2 on graphs with more lower neighbours: the projection drops some.
TRIANGLES = TwoRoundTriangles(epsilon1=1.0, epsilon2=1.0, nodes=NODES, max_degree=2, output="dense")
ONE_ROUND = OneRoundGraph(epsilon1=1.0, epsilon2=1.0, nodes=NODES, output="dense")
SPELLS = {"torch": lambda a: torch.from_numpy(a.copy()), "strict": xs.asarray}


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[device_reference.RecordingWords]:
    """torch and array-api-strict host arrays take the device path; the words of each call of
    the graph functions there."""
    return device_reference.recording_calls(monkeypatch, graph_views)


def _graph(nodes: int, seed: int, density: float = 0.5) -> np.ndarray:
    upper = np.triu(np.random.default_rng(seed).random((nodes, nodes)) < density, 1)
    return (upper | upper.T).astype(np.int64)


def _host(array: Any) -> np.ndarray:
    return np.asarray(np.from_dlpack(array))


def _with(mech: Any, **changes: Any) -> Any:
    return attrs.evolve(mech, **changes)


# -- graph_rr and graph_arr ------------------------------------------------------------------


@pytest.mark.parametrize("spell", ["torch", "strict"])
@pytest.mark.parametrize("mech", [RR, ARR_BOTH], ids=["rr-once", "arr-both"])
def test_the_reports_are_the_hosts_on_the_same_words(
    spell: str, mech: Any, calls: list[device_reference.RecordingWords]
) -> None:
    # Booleans, integers and floats; the dense and packed reports against the host's fed the
    # device's words; the sparse ones the dense reports' 1s on the same key.
    graph = _graph(NODES, 1)
    for dtype in (np.bool_, np.int32, np.float32):
        values = SPELLS[spell](graph.astype(dtype))
        dense = mech.randomize_graph(values, rng=SecureRandom.from_key(KEY))
        assert type(dense.matrix) is type(values) and dense.library is not None
        assert _host(dense.matrix).dtype == np.bool_
        assert calls[-1].real.key == device_reference.call_key(KEY)
        host = mech.randomize_graph(graph, rng=device_reference.replaying(calls[-1].words64()))
        assert np.array_equal(_host(dense.matrix), host.matrix)
        assert 0 < np.count_nonzero(host.dense() != graph) < graph.size  # the channel flips
        packed = _with(mech, output="packed").randomize_graph(
            values, rng=SecureRandom.from_key(KEY)
        )
        assert type(packed.matrix) is type(values)
        assert _host(packed.matrix).dtype == np.uint8
        assert np.array_equal(_host(packed.matrix), np.packbits(host.matrix, axis=1))
        sparse = _with(mech, output="sparse").randomize_graph(
            values, rng=SecureRandom.from_key(KEY)
        )
        assert type(sparse.rows) is type(values) and type(sparse.cols) is type(values)
        rows, cols = np.nonzero(host.matrix)
        assert np.array_equal(_host(sparse.rows), rows) and np.array_equal(_host(sparse.cols), cols)
        assert _host(sparse.rows).dtype == np.int64
        for reports in (dense, packed, sparse):
            assert (reports.nodes, reports.pairs, reports.mechanism) == (
                NODES,
                mech.pairs,
                mech.name,
            )
            assert reports.ones() == host.ones()
            assert np.array_equal(reports.pair_counts(), host.pair_counts())


@pytest.mark.parametrize("mech", [RR, ARR_BOTH], ids=["rr-once", "arr-both"])
def test_fast_mode_reports_are_the_views_on_the_same_generator(
    mech: Any, calls: list[device_reference.RecordingWords]
) -> None:
    graph = torch.from_numpy(_graph(NODES, 2))
    reports = mech.randomize_graph(graph, rng=torch.Generator().manual_seed(7))
    assert not calls[-1].secure
    bits = mech.on_graphs().randomize(graph, rng=torch.Generator().manual_seed(7))
    rows, cols = mech.on_graphs()._index()
    assert np.array_equal(_host(reports.matrix)[rows, cols], _host(bits))
    outside = np.ones((NODES, NODES), dtype=bool)
    outside[rows, cols] = False
    assert not _host(reports.matrix)[outside].any()  # only the reported pairs


@pytest.mark.parametrize("rng", ["secure", "fast"])
@pytest.mark.parametrize("mech", [RR, ARR_BOTH], ids=["rr-once", "arr-both"])
def test_the_reports_have_the_channels_law_in_both_modes(
    rng: str, mech: Any, calls: list[device_reference.RecordingWords]
) -> None:
    # One 120-node graph: the reported 1s among its reported edges ~ Binomial(·, p₁), among
    # its reported non-edges ~ Binomial(·, p₀), p = T/2⁶⁴ (two tests, each at ALPHA).
    n = 120
    big = _with(mech, nodes=n)
    graph = _graph(n, 3, density=0.3)
    generator = SecureRandom.from_key(KEY) if rng == "secure" else torch.Generator().manual_seed(1)
    reports = _host(big.randomize_graph(torch.from_numpy(graph), rng=generator).matrix)
    assert calls[-1].secure == (rng == "secure")
    rows, cols = big.on_graphs()._index()
    truth, said = graph[rows, cols] == 1, reports[rows, cols]
    for where, threshold in zip((truth, ~truth), big._thresholds(), strict=True):
        test = stats.binomtest(int(said[where].sum()), int(where.sum()), threshold / 2.0**64)
        assert test.pvalue > ALPHA


# -- graph_degree and graph_kstar ------------------------------------------------------------


@pytest.mark.parametrize("spell", ["torch", "strict"])
@pytest.mark.parametrize("mech", [DEGREE, KSTAR], ids=["degree", "kstar"])
def test_the_counts_are_the_hosts_and_the_noise_is_randomizes(
    spell: str, mech: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    device_reference.on_device(monkeypatch)
    graph = _graph(NODES, 4, density=0.6)  # degrees above D = 3: the k-star projection shows
    for dtype in (np.bool_, np.int32, np.float32):
        values = SPELLS[spell](graph.astype(dtype))
        keys = [lambda: SecureRandom.from_key(KEY)]
        if spell == "torch":  # fast mode: the caller's generator
            keys.append(lambda: torch.Generator().manual_seed(5))
        for key in keys:
            got = mech.randomize_graph(values, rng=key())
            assert type(got) is type(values) and tuple(got.shape) == (NODES,)
            assert _host(got).dtype == np.int64
            assert np.array_equal(_host(got), _host(mech.randomize(values, rng=key())))
    with monkeypatch.context() as quiet:  # the noise switched off: the host's counts
        quiet.setattr(graph_views, "discrete_laplace", lambda pairs, rate, n: 0)
        counts = _host(mech.randomize_graph(SPELLS[spell](graph)))
    degrees = graph.sum(axis=1)
    assert np.array_equal(counts, mech.count(degrees))
    assert not np.array_equal(counts, degrees) or mech is DEGREE


# -- the refusals ----------------------------------------------------------------------------


def _spoiled() -> list[tuple[np.ndarray, str]]:
    graph = _graph(NODES, 6).astype(np.float64)
    two, nan, half, loop, asymmetric = (graph.copy() for _ in range(5))
    two[1, 0] = two[0, 1] = 2.0
    nan[2, 1] = nan[1, 2] = np.nan
    half[3, 0] = half[0, 3] = 0.5
    loop[4, 4] = 1.0
    asymmetric[5, 0] = 1.0 - asymmetric[0, 5]
    return [
        (two, "must hold 0 or 1"),
        (nan, "must hold 0 or 1"),
        (half, "must hold 0 or 1"),
        (loop, "self-loop"),
        (asymmetric, "not symmetric"),
        (graph[:, :-1], "adjacency matrix|square"),
        (np.stack([graph, graph]), "adjacency matrix|square"),
        (_graph(NODES + 1, 0), "nodes|adjacency matrix"),
    ]


@pytest.mark.parametrize(
    "mech",
    [RR, ARR_BOTH, DEGREE, KSTAR, TRIANGLES, ONE_ROUND],
    ids=["rr", "arr", "deg", "kstar", "two-rounds", "one-round"],
)
def test_the_device_refuses_what_the_host_refuses_before_a_word(
    mech: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    device_reference.on_device(monkeypatch)
    monkeypatch.setattr(graph_views, "device_words", lambda *a, **k: device_reference.Drawless())
    for bad, message in _spoiled():
        with pytest.raises(InvalidData, match=message) as host:
            mech.randomize_graph(bad, rng=np.random.default_rng(0))
        with pytest.raises(InvalidData) as device:
            mech.randomize_graph(torch.from_numpy(bad), rng=SecureRandom.from_key(KEY))
        assert device.value.field == host.value.field == "graph"
        assert "nan" not in str(device.value).lower()  # no value quoted
    with pytest.raises(InvalidData) as wrong:
        mech.randomize_graph(torch.from_numpy(_graph(NODES, 0)), nodes=NODES - 1)
    assert wrong.value.field == "graph"


@pytest.mark.parametrize(
    "mech", [RR, DEGREE, TRIANGLES, ONE_ROUND], ids=["rr", "deg", "two-rounds", "one-round"]
)
def test_the_dtype_and_the_rng_are_refused_before_a_value_is_read(
    mech: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    device_reference.on_device(monkeypatch)

    def read(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a value was read before the refusal")

    graph = torch.from_numpy(_graph(NODES, 0))
    monkeypatch.setattr(torch.Tensor, "__ne__", read)
    monkeypatch.setattr(torch.Tensor, "__eq__", read)
    with pytest.raises(InvalidData, match="0/1") as refused:
        mech.randomize_graph(torch.ones((NODES, NODES), dtype=torch.complex64))
    assert refused.value.field == "graph"
    with pytest.raises(InvalidParameter, match="rng"):
        mech.randomize_graph(graph, rng=42)


# -- the estimators on the device's output ---------------------------------------------------


@pytest.mark.parametrize("output", ["dense", "packed", "sparse"])
@pytest.mark.parametrize("mech", [RR, ARR_BOTH], ids=["rr-once", "arr-both"])
def test_the_estimators_take_the_device_reports(
    output: str, mech: Any, calls: list[device_reference.RecordingWords]
) -> None:
    chosen = _with(mech, output=output)
    reports = chosen.randomize_graph(
        torch.from_numpy(_graph(NODES, 8)), rng=SecureRandom.from_key(KEY)
    )
    held = reports.to_host()
    assert held.library is None and isinstance(held, AdjacencyReports)
    assert held.to_host() is held
    for statistic in (dpkit.graph.edge_count, dpkit.graph.degrees, dpkit.graph.triangles):
        device, host = statistic(chosen, reports), statistic(chosen, held)
        assert np.array_equal(device.estimates, host.estimates)
        assert np.array_equal(device.variance, host.variance)
    assert type(reports.matrix if output != "sparse" else reports.rows) is torch.Tensor  # kept


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_the_count_estimators_take_the_device_releases(
    spell: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    device_reference.on_device(monkeypatch)
    graph = SPELLS[spell](_graph(NODES, 9))
    for mech, statistics in (
        (DEGREE, (dpkit.graph.degrees, dpkit.graph.edge_count, dpkit.graph.degree_distribution)),
        (KSTAR, (dpkit.graph.kstars,)),
    ):
        released = mech.randomize_graph(graph, rng=SecureRandom.from_key(KEY))
        for statistic in statistics:
            device, host = statistic(mech, released), statistic(mech, _host(released))
            assert np.array_equal(device.estimates, host.estimates)
            assert np.array_equal(device.variance, host.variance)
        with pytest.raises(InvalidData) as refused:
            dpkit.graph.degrees(DEGREE, SPELLS[spell](np.zeros(NODES)))
        assert refused.value.field == "reports"


# -- the two-round triangle protocol and the one-round release -------------------------------


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_the_two_rounds_are_the_hosts_on_the_same_words(
    spell: str, calls: list[device_reference.RecordingWords]
) -> None:
    # Round 1 in the dense, packed and sparse encodings; the releases, float64. The host's
    # protocol fed the device's words gives the same dense reports and releases.
    graph = _graph(NODES, 10, density=0.7)  # lower degrees above D = 2
    values = SPELLS[spell](graph)
    got = TRIANGLES.randomize_graph(values, rng=SecureRandom.from_key(KEY))
    assert isinstance(got, TwoRoundReports) and got.step == TRIANGLES.step
    assert type(got.first.matrix) is type(values) and type(got.second) is type(values)
    assert got.first.mechanism == "graph_rr" and got.first.pairs == "once"
    assert calls[-1].real.key == device_reference.call_key(KEY)
    host = TRIANGLES.randomize_graph(graph, rng=device_reference.replaying(calls[-1].words64()))
    assert np.array_equal(_host(got.first.matrix), host.first.matrix)
    assert _host(got.second).dtype == np.float64
    assert np.array_equal(_host(got.second), host.second)
    assert np.any(host.second != 0)
    for output in ("packed", "sparse"):
        other = _with(TRIANGLES, output=output).randomize_graph(
            values, rng=SecureRandom.from_key(KEY)
        )
        assert np.array_equal(other.first.dense(), host.first.matrix)
        assert np.array_equal(_host(other.second), host.second)


def test_fast_two_rounds_are_the_views_on_the_same_generator(
    calls: list[device_reference.RecordingWords],
) -> None:
    graph = torch.from_numpy(_graph(NODES, 11, density=0.7))
    got = TRIANGLES.randomize_graph(graph, rng=torch.Generator().manual_seed(3))
    assert not calls[-1].secure
    view = _host(TRIANGLES.on_graphs().randomize(graph, rng=torch.Generator().manual_seed(3)))
    pairs = NODES * (NODES - 1) // 2
    rows, cols = np.tril_indices(NODES, -1)
    assert np.array_equal(_host(got.first.matrix)[rows, cols], view[:pairs] != 0)
    assert np.array_equal(_host(got.second), view[pairs:])


def test_the_one_round_is_the_hosts_on_the_same_words(
    calls: list[device_reference.RecordingWords],
) -> None:
    # Two device calls (the noisy lists, then the noisy degrees), each its own key from the
    # SecureRandom; the host's release fed both calls' words, in order, gives the same.
    graph = _graph(NODES, 12)
    got = ONE_ROUND.randomize_graph(torch.from_numpy(graph), rng=SecureRandom.from_key(KEY))
    assert isinstance(got, OneRoundReports) and len(calls) == 2
    source = SecureRandom.from_key(KEY)  # the two calls' keys: its first eight words
    keys = [tuple(int(w) for w in source.words(4).view(np.uint32)) for _ in calls]
    assert [call.real.key for call in calls] == keys
    assert type(got.adjacency.matrix) is torch.Tensor and type(got.degrees) is torch.Tensor
    words = np.concatenate([call.words64() for call in calls])
    host = ONE_ROUND.randomize_graph(graph, rng=device_reference.replaying(words))
    assert np.array_equal(_host(got.adjacency.matrix), host.adjacency.matrix)
    assert np.array_equal(_host(got.degrees), host.degrees)


def test_the_round_estimators_take_the_device_reports(
    calls: list[device_reference.RecordingWords],
) -> None:
    graph = torch.from_numpy(_graph(NODES, 13, density=0.7))
    two = TRIANGLES.randomize_graph(graph, rng=SecureRandom.from_key(KEY))
    held = TwoRoundReports(two.first.to_host(), _host(two.second), two.step)
    device, host = dpkit.graph.triangles(TRIANGLES, two), dpkit.graph.triangles(TRIANGLES, held)
    assert (device.value, device.variance) == (host.value, host.variance)
    assert np.isfinite(device.variance)  # the round-1 reports' wedge term
    bare, bare_host = (dpkit.graph.triangles(TRIANGLES, r) for r in (two.second, held.second))
    assert bare.value == bare_host.value == host.value  # the releases alone, summed there
    one = ONE_ROUND.randomize_graph(graph, rng=SecureRandom.from_key(KEY))
    copied = OneRoundReports(one.adjacency.to_host(), _host(one.degrees))
    for statistic in (dpkit.graph.triangles, dpkit.graph.kstars):
        device, host = statistic(ONE_ROUND, one), statistic(ONE_ROUND, copied)
        assert (device.value, device.variance) == (host.value, host.variance)
    with pytest.raises(InvalidData) as refused:  # releases that are not one a user
        dpkit.graph.triangles(TRIANGLES, torch.zeros((NODES, 2)))
    assert refused.value.field == "reports"
