"""The graph protocols on whole graphs on the device path, run on the CPU (torch tensors and
array-api-strict arrays treated as an accelerator's): ``graph_rr``'s and ``graph_arr``'s views
(every user's reported bits, and the coercion of a matrix into a graph) and the two-round
triangle protocol's view.

The reported bits are the host view's on the same 64-bit words in both forms, and have the
channel's joint law in both modes; the coercion reads the lower triangle and replaces a
non-0/1 entry by a uniform bit, as the host's. The two rounds: the wedge sums are the host's
``wedge_sums`` to the bit on graphs whose degrees exceed D (the projection shows), a batch of
copies of one graph gives the host's output on the same words, and the releases have the
host's law (the lattice coin and the exact discrete Laplace noise) in both modes. The host's
refusals come before any word is drawn.

χ² and binomial tests below: each refuses a correct law with probability at most
ALPHA = 1e-6."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from dpkit_ldp import graph_arr, graph_rr  # noqa: E402
from dpkit_ldp.graph_reports import AdjacencyReports  # noqa: E402
from dpkit_ldp.graph_triangles import TwoRoundTriangles, projected_lower, wedge_pairs  # noqa: E402
from dpkit_ldp.graphs import Graph  # noqa: E402
from support import device_reference  # noqa: E402

from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData, InvalidParameter  # noqa: E402
from dpkit.tensors import array_library, device_random, graph_views  # noqa: E402

ALPHA = 1e-6
KEY = bytes(range(32))
RR = graph_rr.GraphRandomizedResponse(epsilon=1.0, nodes=5)
ARR_BOTH = graph_arr.AsymmetricRandomizedResponse(epsilon=1.0, nodes=5, mu=0.3, pairs="both")
#: D = 2 on graphs with up to five lower neighbours: the projection drops some.
PROTOCOL = TwoRoundTriangles(epsilon1=1.0, epsilon2=1.0, nodes=6, max_degree=2)
COMPLETE = np.ones((6, 6), dtype=np.int64) - np.eye(6, dtype=np.int64)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[device_reference.RecordingWords]:
    """torch and array-api-strict host arrays take the device path; the list holds the words of
    each call of the graph views there (none for a call refused before drawing)."""
    return device_reference.recording_calls(monkeypatch, graph_views)


def _host(array: Any) -> np.ndarray:
    return array.numpy() if isinstance(array, torch.Tensor) else np.from_dlpack(array)


def _spelled(values: np.ndarray, spell: str) -> Any:
    return torch.from_numpy(values.copy()) if spell == "torch" else xs.asarray(values)


def _random_graphs(seed: int, shape: tuple[int, ...], nodes: int) -> np.ndarray:
    """Symmetric 0/1 matrices with a zero diagonal."""
    lower = np.tril(np.random.default_rng(seed).random((*shape, nodes, nodes)) < 0.6, -1)
    return lower | np.swapaxes(lower, -1, -2)


# -- graph_rr's and graph_arr's views --------------------------------------------------------


@pytest.mark.parametrize("spell", ["torch", "strict"])
@pytest.mark.parametrize("mech", [RR, ARR_BOTH], ids=["rr-once", "arr-both"])
def test_reported_bits_are_the_hosts_on_the_same_words(
    spell: str, mech: Any, calls: list[device_reference.RecordingWords]
) -> None:
    # A (2, 3) batch of 5-node matrices (random 0/1, not symmetric: the "both" form reads
    # every ordered pair) as booleans, integers and floats: bit k of the flattened reports takes
    # keystream words 2k and 2k + 1; the host's view fed those words gives the same bits.
    view = mech.on_graphs()
    graphs = np.random.default_rng(3).random((2, 3, 5, 5)) < 0.5
    width = 10 if mech.pairs == "once" else 20
    for dtype in (np.bool_, np.int32, np.float32):
        values = _spelled(graphs.astype(dtype), spell)
        got = view.randomize(values, rng=SecureRandom.from_key(KEY))
        assert type(got) is type(values) and tuple(got.shape) == (2, 3, width)
        assert got.dtype == (torch.bool if spell == "torch" else xs.bool)
        call = calls[-1]
        assert call.secure and call.real.key == device_reference.call_key(KEY)
        blocks = -(-2 * 6 * width // 16)
        words = device_reference.stream(call.real.key, blocks).reshape(-1).astype(np.uint64)
        assert np.array_equal(np.concatenate(call.taken), words[: 2 * 6 * width])
        host = view.randomize(graphs, rng=device_reference.replaying(call.words64()))
        assert np.array_equal(_host(got), host)
        truth = graphs.reshape(6, 25)[:, view._index()[0] * 5 + view._index()[1]]
        assert 0 < np.count_nonzero(host.reshape(6, width) != truth) < truth.size
    assert len(calls) == 3


@pytest.mark.parametrize("rng", ["secure", "fast"])
@pytest.mark.parametrize("mech", [RR, ARR_BOTH], ids=["rr-once", "arr-both"])
def test_reported_bits_have_the_channels_joint_law_in_both_modes(
    rng: str, mech: Any, calls: list[device_reference.RecordingWords]
) -> None:
    # 10 000 reports of the 3-node path 0–1–2 ("once": the bits of (1,0), (2,0), (2,1) are
    # 1, 0, 1; "both": six bits): the counts of the joint reports against the product law of
    # the exact channel (p₁ = T₁/2⁶⁴, p₀ = T₀/2⁶⁴), the rare reports pooled.
    small = type(mech)(**{**_params(mech), "nodes": 3})
    view = small.on_graphs()
    path = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=np.int64)
    generator = None if rng == "secure" else torch.Generator().manual_seed(2)
    out = _host(view.randomize(torch.from_numpy(np.tile(path, (10_000, 1, 1))), rng=generator))
    assert out.dtype == np.bool_ and len(calls) == 1 and calls[0].secure == (rng == "secure")
    rows, cols = view._index()
    truth = path[rows, cols]
    one, zero = (t / 2.0**64 for t in small._thresholds())
    p = np.where(truth == 1, one, zero)
    width = truth.size
    space = ((np.arange(2**width)[:, None] >> np.arange(width - 1, -1, -1)) & 1).astype(bool)
    law = np.prod(np.where(space, p, 1.0 - p), axis=1)
    observed = np.bincount(
        out.astype(np.int64) @ (1 << np.arange(width - 1, -1, -1)), minlength=law.size
    )
    expected = law * out.shape[0]
    keep = expected > 5  # the χ² approximation's rule; the rare reports pooled into one cell
    pooled = np.append(observed[keep], observed[~keep].sum())
    pooled_expected = np.append(expected[keep], expected[~keep].sum())
    if keep.all():
        pooled, pooled_expected = observed, expected
    assert keep.sum() >= 8
    assert stats.chisquare(pooled, pooled_expected).pvalue > ALPHA


def _params(mech: Any) -> dict[str, Any]:
    return {name: getattr(mech, name) for name in type(mech).parameters()}


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_the_coercion_is_the_hosts(
    spell: str, calls: list[device_reference.RecordingWords]
) -> None:
    # Lower-triangle entries 1, 0, True, 1.0 are kept, NaN, 2, 0.5 and −1 become uniform bits;
    # the upper triangle and the diagonal are never read; the result is mirrored, int64.
    view = RR.on_graphs()
    matrix = np.full((5, 5), 7.0)  # 7: what the upper triangle and diagonal hold, never read
    rows, cols = np.tril_indices(5, -1)
    lower = np.array([1.0, 0.0, np.nan, 2.0, 0.5, -1.0, 1.0, 0.0, -0.0, 1.0])
    matrix[rows, cols] = lower
    valid = np.isin(lower, (0.0, 1.0))
    batch = np.tile(matrix, (2_000, 1, 1))
    got = view.coerce(_spelled(batch, spell), rng=SecureRandom.from_key(KEY))
    out = _host(got)
    assert out.dtype == np.int64 and out.shape == batch.shape and len(calls) == 1
    assert np.array_equal(out, np.swapaxes(out, 1, 2)) and not out[:, range(5), range(5)].any()
    bits = out[:, rows, cols]
    assert np.array_equal(
        bits[:, valid], np.broadcast_to(lower[valid].astype(np.int64), (2_000, valid.sum()))
    )
    host = view.coerce(matrix, rng=np.random.default_rng(0))[rows, cols]
    assert np.array_equal(host[valid], bits[0, valid])  # the host keeps the same entries
    replaced = bits[:, ~valid]
    assert set(np.unique(replaced)) == {0, 1}
    assert stats.binomtest(int(replaced.sum()), replaced.size, 0.5).pvalue > ALPHA
    # Each replaced entry its own bit: the four columns' joint law is uniform on 16 cells.
    joint = np.bincount(replaced @ np.array([8, 4, 2, 1]), minlength=16)
    assert stats.chisquare(joint).pvalue > ALPHA
    for dtype in (np.bool_, np.int8):
        kept = _host(view.coerce(_spelled(COMPLETE[:5, :5].astype(dtype), spell)))
        assert np.array_equal(kept, COMPLETE[:5, :5])
    complex_graph = torch.ones((2, 5, 5), dtype=torch.complex64)
    randomized = _host(view.coerce(complex_graph))  # never a bit: all uniform, as the host's
    assert randomized.shape == (2, 5, 5) and set(np.unique(randomized)) <= {0, 1}


# -- the two-round triangle protocol's view --------------------------------------------------


def _host_wedge_sums(graph: np.ndarray, noisy: np.ndarray) -> np.ndarray:
    """The host's ``wedge_sums`` with the round-1 reports ``noisy`` (lower pairs, row-major)."""
    rows, cols = np.tril_indices(PROTOCOL.nodes, -1)
    first = AdjacencyReports(
        "graph_rr", PROTOCOL.nodes, "once", "sparse", rows=rows[noisy], cols=cols[noisy]
    )
    return PROTOCOL.wedge_sums(Graph.from_dense(graph), first)


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_wedge_sums_are_the_hosts_with_the_projection(spell: str) -> None:
    # Random 6-node graphs (lower degrees up to 5) and the complete one, at D = 2, with random
    # round-1 reports: the device's w is the host's to the bit; at D = 5 (no projection) it
    # differs for some graph, so the projection shows.
    graphs = np.concatenate([_random_graphs(5, (30,), 6), COMPLETE[None].astype(bool)])
    noisy = np.random.default_rng(6).random((31, 15)) < 0.5
    library = array_library(_spelled(graphs, spell), owner="test")
    assert library is not None

    def device(max_degree: int) -> np.ndarray:
        w = graph_views.wedge_sums(
            library,
            _spelled(graphs, spell),
            _spelled(noisy, spell),
            max_degree=max_degree,
            report_zero=PROTOCOL.first_mechanism.report_zero,
        )
        return _host(w)

    got = device(2)
    host = np.stack([_host_wedge_sums(g, r) for g, r in zip(graphs, noisy, strict=True)])
    assert got.dtype == np.float64 and np.array_equal(got, host)
    assert not np.array_equal(device(5), host)
    assert (np.tril(graphs, -1).sum(axis=2) > 2).any()


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_two_rounds_are_the_hosts_on_the_same_words(
    spell: str, calls: list[device_reference.RecordingWords]
) -> None:
    # A (5, 8) batch of copies of one graph (the complete one; then a random one), as booleans,
    # integers and floats: the host's view fed the device's words gives the same output.
    view = PROTOCOL.on_graphs()
    for graph, dtype in (
        (COMPLETE, np.int64),
        (_random_graphs(7, (), 6), np.bool_),
        (_random_graphs(8, (), 6), np.float32),
    ):
        batch = np.broadcast_to(graph.astype(dtype), (5, 8, 6, 6)).copy()
        values = _spelled(batch, spell)
        got = view.randomize(values, rng=SecureRandom.from_key(KEY))
        assert type(got) is type(values) and tuple(got.shape) == (5, 8, 21)
        assert _host(got).dtype == np.float64 and calls[-1].secure
        host = view.randomize(batch, rng=device_reference.replaying(calls[-1].words64()))
        assert np.array_equal(_host(got), host)


def _laplace_cdf(z: np.ndarray, scale: float) -> np.ndarray:
    """P[Z ≤ z] for the discrete Laplace of ``scale`` (α = e^{−1/t}): α^{−z}/(1 + α) below 0,
    1 − α^{z+1}/(1 + α) from 0 on."""
    alpha = math.exp(-1.0 / scale)
    z = np.asarray(z, dtype=np.float64)
    below = np.exp(np.minimum(z, 0.0) / scale) / (1.0 + alpha)
    above = 1.0 - np.exp(-(np.maximum(z, 0.0) + 1.0) / scale) / (1.0 + alpha)
    return np.where(z < 0, below, above)


@pytest.mark.parametrize("rng", ["secure", "fast"])
def test_two_round_releases_have_the_hosts_law_in_both_modes(
    rng: str, calls: list[device_reference.RecordingWords]
) -> None:
    # 2 000 releases of the complete graph (6 users each): w_i from each copy's own round-1
    # bits by the host's projection and wedges; then r = release/g − ⌊w/g⌋ is Z + B, Z discrete
    # Laplace of the protocol's scale, B Bernoulli(frac(w/g)): its counts in 8 bins against the
    # exact mixture, summed over the releases (independent, not identically distributed: the
    # χ² statistic is then stochastically smaller than for one multinomial, so the level holds).
    # The round-1 bits' count against p₁ too.
    view = PROTOCOL.on_graphs()
    copies = 2_000
    batch = torch.from_numpy(np.tile(COMPLETE, (copies, 1, 1)))
    generator = None if rng == "secure" else torch.Generator().manual_seed(5)
    out = _host(view.randomize(batch, rng=generator))
    assert len(calls) == 1 and calls[0].secure == (rng == "secure")
    bits, released = out[:, :15], out[:, 15:]
    assert set(np.unique(bits)) == {0.0, 1.0}
    one = PROTOCOL.first_mechanism._thresholds()[0] / 2.0**64  # every pair an edge: p₁ each
    assert stats.binomtest(int(bits.sum()), bits.size, one).pvalue > ALPHA
    incidence = np.zeros((6, 15))
    offsets, neighbours = projected_lower(Graph.from_dense(COMPLETE), PROTOCOL.max_degree)
    for users, j, k in wedge_pairs(offsets, neighbours):
        high, low = np.maximum(j, k), np.minimum(j, k)
        np.add.at(
            incidence, (np.repeat(users, j.shape[1]), (high * (high - 1) // 2 + low).ravel()), 1.0
        )
    sizes = np.diff(offsets)
    w = bits @ incidence.T - PROTOCOL.first_mechanism.report_zero * (sizes * (sizes - 1) // 2)
    g, t = PROTOCOL.step, float(PROTOCOL.scale)
    base = np.floor(w / g)
    r = released / g - base
    assert np.array_equal(r, np.round(r))  # lattice points
    f = (w / g - base).reshape(-1)
    edges = np.array([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0]) * t
    cuts = np.floor(edges)  # bins (−∞, c₀], (c₀, c₁], …, (c₆, ∞)
    cdf = (1.0 - f)[:, None] * _laplace_cdf(cuts, t)[None, :] + f[:, None] * _laplace_cdf(
        cuts - 1.0, t
    )[None, :]
    probabilities = np.diff(
        np.concatenate([np.zeros((f.size, 1)), cdf, np.ones((f.size, 1))], axis=1)
    )
    expected = probabilities.sum(axis=0)
    observed = np.bincount(np.searchsorted(cuts, r.reshape(-1), side="left"), minlength=8)
    assert expected.min() > 5
    assert stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue > ALPHA


@pytest.mark.usefixtures("calls")
def test_the_views_refuse_what_the_host_refuses_before_any_word(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    relationships = RR.on_graphs()
    triangles = PROTOCOL.on_graphs()
    for view, nodes in ((relationships, 5), (triangles, 6)):
        with pytest.raises(InvalidParameter, match="rng"):
            view.randomize(torch.zeros((nodes, nodes)), rng=42)
    monkeypatch.setattr(graph_views, "device_words", lambda *a, **k: device_reference.Drawless())
    two = np.zeros((5, 5))
    two[3, 1] = 2
    for view, bad, message in (
        (relationships, torch.from_numpy(two), "must hold 0 or 1"),
        (relationships, torch.full((5, 5), float("nan")), "must hold 0 or 1"),
        (triangles, torch.from_numpy(np.where(COMPLETE == 1, 0.5, 0.0)), "must hold 0 or 1"),
        (triangles, torch.from_numpy(np.eye(6)), "self-loop"),
        (triangles, torch.from_numpy(np.tril(COMPLETE, -1)), "not symmetric"),
    ):
        with pytest.raises(InvalidData, match=message):
            view.randomize(bad)
        with pytest.raises(InvalidData, match=message):
            view.randomize(_host(bad))  # the host says the same
    for view, nodes in ((relationships, 5), (triangles, 6)):
        with pytest.raises(InvalidData, match="adjacency matrix, got shape") as refused:
            view.randomize(torch.zeros((nodes, nodes + 1)))
        assert refused.value.field == "graph"
    with pytest.raises(InvalidData, match="adjacency matrix, got shape"):
        relationships.coerce(torch.zeros((4, 4)))

    def read(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a value was read before a public refusal")

    monkeypatch.setattr(torch.Tensor, "__ne__", read)
    monkeypatch.setattr(torch.Tensor, "__eq__", read)
    for view, nodes in ((relationships, 5), (triangles, 6)):
        with pytest.raises(InvalidData, match="must hold 0/1"):
            view.randomize(torch.ones((nodes, nodes), dtype=torch.complex64))
    monkeypatch.setattr(device_random, "index_dtype", lambda xp: xp.int32)  # JAX without x64
    for view, nodes in ((relationships, 5), (triangles, 6)):
        with pytest.raises(InvalidData, match="64-bit integers"):
            view.randomize(torch.zeros((nodes, nodes)))
    with pytest.raises(InvalidData, match="64-bit integers"):
        relationships.coerce(torch.zeros((5, 5)))


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_empty_batches_keep_their_shape(
    spell: str, calls: list[device_reference.RecordingWords]
) -> None:
    for view, nodes, width in ((RR.on_graphs(), 5, 10), (PROTOCOL.on_graphs(), 6, 21)):
        got = view.randomize(_spelled(np.zeros((0, 2, nodes, nodes)), spell))
        host = view.randomize(np.zeros((0, 2, nodes, nodes)))
        assert tuple(got.shape) == host.shape == (0, 2, width)
        assert _host(got).dtype == host.dtype
