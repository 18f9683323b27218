"""KProp and label denoising over a public graph: the operator against dense matrix powers,
exact expectations and variances by enumerating the mechanisms' laws, a simulation through the
real sampler, refusals naming the field, and denoised labels beating the raw ones on a
stochastic block model."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from dpkit_ldp.graphs import as_graph

import dpkit
import dpkit._propagation
from dpkit.errors import InvalidData, InvalidParameter


def random_adjacency(n: int, density: float, seed: int) -> np.ndarray:
    """A symmetric 0/1 matrix with a zero diagonal; node 0 is isolated."""
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < density, 1)
    adjacency = upper | upper.T
    adjacency[0, :] = adjacency[:, 0] = False
    return adjacency


def dense_operator(adjacency: np.ndarray, steps: int, self_loops: bool) -> np.ndarray:
    """W = P^K from the dense matrix: P = the row-normalised adjacency (plus I with self
    loops; an isolated node's row is e_v)."""
    a = adjacency.astype(np.float64)
    if self_loops:
        a += np.eye(len(a))
    isolated = a.sum(axis=1) == 0
    a[isolated, isolated] = 1.0
    return np.linalg.matrix_power(a / a.sum(axis=1, keepdims=True), steps)


def graph_forms(adjacency: np.ndarray) -> list[Any]:
    rows, cols = np.nonzero(np.triu(adjacency))
    return [
        adjacency,  # dense boolean
        adjacency.astype(np.int8),  # dense 0/1
        (rows, cols),  # each edge once
        (np.r_[rows, cols], np.r_[cols, rows]),  # each edge in both orientations
        as_graph(adjacency),  # compressed rows (dpkit_ldp's Graph)
    ]


@pytest.mark.parametrize("self_loops", [False, True])
@pytest.mark.parametrize("steps", [0, 1, 3])
def test_operator_is_the_dense_matrix_power(
    self_loops: bool, steps: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dpkit._propagation, "ROWS_PER_BLOCK", 3)  # blocks split the rows
    adjacency = random_adjacency(11, 0.3, seed=steps)
    w = dense_operator(adjacency, steps, self_loops)
    sigma2 = np.random.default_rng(5).random((11, 2))
    for graph in graph_forms(adjacency):
        # propagating the identity's columns gives W itself
        identity = dpkit.graph.propagate(
            graph, np.eye(11), steps, variance=0.0, self_loops=self_loops
        )
        np.testing.assert_allclose(identity.estimates, w, atol=1e-13)
        result = dpkit.graph.propagate(graph, sigma2, steps, variance=sigma2, self_loops=self_loops)
        np.testing.assert_allclose(result.variance, (w * w) @ sigma2, rtol=1e-12)
        per_node = dpkit.graph.propagate(
            graph, sigma2, steps, variance=sigma2[:, 0], self_loops=self_loops
        )
        np.testing.assert_allclose(per_node.variance[:, 1], (w * w) @ sigma2[:, 0], rtol=1e-12)
    # the isolated node keeps its value without self loops, and with them
    assert result.estimates[0].tolist() == sigma2[0].tolist()


@pytest.mark.parametrize("self_loops", [False, True])
def test_rectified_features_propagate_exactly_unbiased_with_the_exact_variance(
    self_loops: bool,
) -> None:
    """Every one of the 2⁶ joint reports of the multi-bit mechanism (one feature per node),
    weighted by its exact probability: E = W·x and Var = (W∘W)·Var(x̃) exactly."""
    mechanism = dpkit.mechanism("multibit", epsilon=1.0, lower=-1.0, upper=2.0, dimension=1)
    space = mechanism.output_space()[:, 0]  # the two reports
    x = np.array([-1.0, 0.3, 2.0, 1.1, 0.0, -0.4])
    adjacency = random_adjacency(6, 0.5, seed=2)
    w = dense_operator(adjacency, 2, self_loops)
    law = np.exp(mechanism.log_probability(space[None, :, None], x[:, None, None]))  # (6, 2)
    outcomes = np.array(list(itertools.product((0, 1), repeat=6))).T  # (6, 64)
    probability = np.prod(law[np.arange(6)[:, None], outcomes], axis=0)
    assert probability.sum() == pytest.approx(1.0, abs=1e-12)
    sigma2 = mechanism.variance_at(x[:, None])[:, 0]
    result = dpkit.graph.propagate(
        adjacency, space[outcomes], 2, variance=sigma2, self_loops=self_loops
    )
    mean = result.estimates @ probability
    np.testing.assert_allclose(mean, w @ x, atol=1e-12)
    second = np.square(result.estimates - mean[:, None]) @ probability
    np.testing.assert_allclose(second, (w * w) @ sigma2, rtol=1e-10)
    np.testing.assert_allclose(result.variance[:, 0], (w * w) @ sigma2, rtol=1e-12)


def test_simulated_mean_and_variance_through_the_real_sampler() -> None:
    """3,000 independent releases of 30 nodes' 2 features (fast mode), propagated two steps.
    Per node and feature, the mean is within 6 standard errors of W·x (normal tail 2.0e-9) and
    the sample variance within 6 of its own standard errors of the exact variance
    (asymptotic normal tail 2.0e-9); 60 + 60 checks: false-positive rate ≤ 2.4e-7."""
    repetitions, n = 3_000, 30
    mechanism = dpkit.mechanism("multibit", epsilon=2.0, lower=0.0, upper=1.0, dimension=2)
    rng = np.random.default_rng(20261128)
    x = rng.random((n, 2))
    adjacency = random_adjacency(n, 0.15, seed=11)
    reports = mechanism.randomize(np.tile(x, (repetitions, 1)), rng=rng)
    values = reports.reshape(repetitions, n, 2).transpose(1, 0, 2).reshape(n, -1)
    sigma2 = np.tile(mechanism.variance_at(x), (1, repetitions))
    result = dpkit.graph.propagate(adjacency, values, 2, variance=sigma2)
    w = dense_operator(adjacency, 2, self_loops=True)  # propagate's default: closed
    runs = result.estimates.reshape(n, repetitions, 2)
    exact = result.variance.reshape(n, repetitions, 2)[:, 0]
    np.testing.assert_allclose(exact, (w * w) @ mechanism.variance_at(x), rtol=1e-12)
    mean = runs.mean(axis=1)
    assert np.all(np.abs(mean - w @ x) <= 6.0 * np.sqrt(exact / repetitions))
    centred = runs - mean[:, None, :]
    sample = np.square(centred).mean(axis=1)
    fourth = np.power(centred, 4).mean(axis=1)
    assert np.all(np.abs(sample - exact) <= 6.0 * np.sqrt((fourth - sample**2) / repetitions))


def test_label_distribution_is_exactly_unbiased_over_the_krr_law() -> None:
    """All 3⁵ report vectors of 5 nodes, weighted by their k-RR probabilities: E[f̂] = W·onehot(x)
    and Var[f̂] = (W∘W)·(a + b·onehot(x)) with Wang et al.'s a = q(1 − q)/(p − q)²,
    b = (1 − p − q)/(p − q); the reported variance is that formula at the debiased reports,
    floored at 0, whose unfloored mean is the exact variance."""
    krr = dpkit.mechanism("krr", epsilon=1.0, k=3)
    p, q = math.e / (math.e + 2.0), 1.0 / (math.e + 2.0)
    a, b = q * (1 - q) / (p - q) ** 2, (1 - p - q) / (p - q)
    truth = np.array([0, 2, 2, 1, 0])
    edges = (np.array([0, 0, 1, 2]), np.array([1, 2, 2, 3]))  # node 4 isolated
    adjacency = np.zeros((5, 5), dtype=bool)
    adjacency[edges] = adjacency[edges[::-1]] = True
    w = dense_operator(adjacency, 2, self_loops=False)
    truth_onehot = np.eye(3)[truth]
    mean = np.zeros((5, 3))
    second = np.zeros((5, 3))
    unfloored_mean = np.zeros((5, 3))
    results = []
    for reports in itertools.product(range(3), repeat=5):
        probability = float(np.prod(np.where(np.array(reports) == truth, p, q)))
        result = dpkit.graph.label_distribution(krr, edges, np.array(reports), 2)
        debiased = (np.eye(3)[list(reports)] - q) / (p - q)
        unfloored = (w * w) @ (a + b * debiased)
        np.testing.assert_allclose(result.variance, np.maximum(unfloored, 0.0), atol=1e-12)
        mean += probability * result.estimates
        unfloored_mean += probability * unfloored
        results.append((probability, result.estimates))
    np.testing.assert_allclose(mean, w @ truth_onehot, atol=1e-12)
    for probability, estimates in results:
        second += probability * np.square(estimates - mean)
    exact = (w * w) @ (a + b * truth_onehot)
    np.testing.assert_allclose(second, exact, rtol=1e-10)
    np.testing.assert_allclose(unfloored_mean, exact, rtol=1e-10)
    assert result.labels == (0, 1, 2) and result.variance_kind == "unbiased"


def test_denoised_labels_beat_the_noisy_ones_on_a_stochastic_block_model() -> None:
    """Three communities of 150 nodes (edge probability 0.8 inside, 0.02 across), labels =
    communities, krr at ε = 2. Raw accuracy ≥ T = 0.92 has probability ≤ e^{−2n(T − p)²}
    (Hoeffding); denoised accuracy ≤ T has probability ≤ E[#wrong]/(n(1 − T)) (Markov), with
    P[node v wrong] bounded per competing label by Hoeffding on f̂_c − f̂_c′, a weighted sum of
    independent terms of range W[v, u]·2/(p − q). Both bounds are computed below on this
    graph; their sum, the false-positive rate, is asserted ≤ 1e-6."""
    rng = np.random.default_rng(31)
    n, k = 450, 3
    truth = np.repeat(np.arange(k), n // k)
    same = truth[:, None] == truth[None, :]
    upper = np.triu(rng.random((n, n)) < np.where(same, 0.8, 0.02), 1)
    adjacency = upper | upper.T
    krr = dpkit.mechanism("krr", epsilon=2.0, k=k)
    p, q = krr.keep_probability, krr.other_probability
    threshold = 0.92
    raw_bound = math.exp(-2 * n * (threshold - p) ** 2)
    w = dense_operator(adjacency, 1, self_loops=False)
    spread = np.sqrt(np.sum(np.square(w), axis=1)) * 2.0 / (p - q)
    wrong = np.zeros(n)
    own = np.sum(w * (truth[None, :] == truth[:, None]), axis=1)  # Σ_u W[v, u]·1[x_u = x_v]
    for other in range(k):
        margin = own - w @ (truth == other)
        bound = np.exp(-2.0 * np.square(np.maximum(margin, 0.0)) / np.square(spread))
        wrong += np.where(truth == other, 0.0, np.where(margin > 0, bound, 1.0))
    denoised_bound = float(np.minimum(wrong, 1.0).sum()) / (n * (1.0 - threshold))
    assert raw_bound + denoised_bound <= 1e-6  # the design's false-positive rate

    noisy = krr.randomize(truth, rng=rng)
    denoised = dpkit.graph.denoised_labels(dpkit.graph.label_distribution(krr, adjacency, noisy, 1))
    assert np.mean(noisy == truth) < threshold < np.mean(denoised == truth)


def _krr() -> Any:
    return dpkit.mechanism("krr", epsilon=1.0, k=3)


_PATH = (np.array([0, 1]), np.array([1, 2]))

REFUSALS: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    (
        "values rows",
        lambda: dpkit.graph.propagate(np.zeros((3, 3)), np.zeros(4), 1, variance=1.0),
        InvalidData,
        "graph",
    ),
    (
        "edge outside the nodes",
        lambda: dpkit.graph.propagate((np.array([0]), np.array([5])), np.zeros(3), 1, variance=1),
        InvalidData,
        "graph",
    ),
    (
        "self loop",
        lambda: dpkit.graph.propagate((np.array([1]), np.array([1])), np.zeros(3), 1, variance=1),
        InvalidData,
        "graph",
    ),
    (
        "asymmetric",
        lambda: dpkit.graph.propagate(np.triu(np.ones((3, 3)), 1), np.zeros(3), 1, variance=1),
        InvalidData,
        "graph",
    ),
    (
        "ragged edges",
        lambda: dpkit.graph.propagate(
            (np.array([0, 1]), np.array([1])), np.zeros(3), 1, variance=1
        ),
        InvalidData,
        "graph",
    ),
    (
        "steps < 0",
        lambda: dpkit.graph.propagate(_PATH, np.zeros(3), -1, variance=1),
        InvalidParameter,
        "steps",
    ),
    (
        "steps 1.5",
        lambda: dpkit.graph.propagate(_PATH, np.zeros(3), 1.5, variance=1),
        InvalidParameter,
        "steps",
    ),
    (
        "text values",
        lambda: dpkit.graph.propagate(_PATH, ["a", "b", "c"], 1, variance=1),
        InvalidData,
        "values",
    ),
    (
        "NaN values",
        lambda: dpkit.graph.propagate(_PATH, [0.0, np.nan, 1.0], 1, variance=1),
        InvalidData,
        "values",
    ),
    (
        "variance shape",
        lambda: dpkit.graph.propagate(_PATH, np.zeros((3, 2)), 1, variance=np.ones(2)),
        InvalidData,
        "variance",
    ),
    (
        "negative variance",
        lambda: dpkit.graph.propagate(_PATH, np.zeros(3), 1, variance=-1.0),
        InvalidData,
        "variance",
    ),
    (
        "variance kind",
        lambda: dpkit.graph.propagate(_PATH, np.zeros(3), 1, variance=1, variance_kind="delta"),
        InvalidParameter,
        "variance_kind",
    ),
    (
        "self_loops",
        lambda: dpkit.graph.propagate(_PATH, np.zeros(3), 1, variance=1, self_loops="yes"),
        InvalidParameter,
        "self_loops",
    ),
    (
        "not krr",
        lambda: dpkit.graph.label_distribution(
            dpkit.mechanism("rr", epsilon=1.0), _PATH, np.zeros(3, dtype=int), 1
        ),
        InvalidParameter,
        "mechanism",
    ),
    (
        "label out of range",
        lambda: dpkit.graph.label_distribution(_krr(), _PATH, [0, 3, 1], 1),
        InvalidData,
        "reports",
    ),
    (
        "reports 2-D",
        lambda: dpkit.graph.label_distribution(_krr(), _PATH, [[0, 1, 2]], 1),
        InvalidData,
        "reports",
    ),
    (
        "reports rows",
        lambda: dpkit.graph.label_distribution(_krr(), _PATH, [0, 1], 1),
        InvalidData,
        "graph",
    ),
    (
        "label steps",
        lambda: dpkit.graph.label_distribution(_krr(), _PATH, [0, 1, 2], -2),
        InvalidParameter,
        "steps",
    ),
    (
        "not a distribution",
        lambda: dpkit.graph.denoised_labels(
            dpkit.graph.propagate(_PATH, np.zeros(3), 1, variance=1)
        ),
        InvalidParameter,
        "distribution",
    ),
]


@pytest.mark.parametrize(("case", "call", "error", "field"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_bad_input_is_refused_naming_the_field(
    case: str, call: Callable[[], Any], error: type[Exception], field: str
) -> None:
    with pytest.raises(error) as raised:
        call()
    named = (
        raised.value.parameter if isinstance(raised.value, InvalidParameter) else raised.value.field
    )
    assert named == field, case


@pytest.fixture
def device_tensors(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """torch and array-api-strict host arrays take the device path (as a CUDA tensor would),
    the graph's arrays too (copied to the host: it is public); the list records the calls of
    the device path."""
    from support import device_reference

    import dpkit.graph

    return device_reference.on_device(monkeypatch, [(dpkit.graph, "_propagate_on_device")])


def _gamma(m: int) -> float:
    """γ_m = m·u/(1 − m·u), u = 2⁻⁵³: a sum of m + 1 terms in any order is within γ_m of the
    sum of their magnitudes (Higham 2002, §4.2); m rounded products and their sum, γ_m."""
    return m * 2.0**-53 / (1 - m * 2.0**-53)


@pytest.mark.parametrize("spell", ["torch", "strict"])
@pytest.mark.parametrize("steps", [0, 1, 3])
def test_the_device_path_is_the_numpy_path_up_to_the_order_of_its_sums(
    spell: str, steps: int, device_tensors: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 40 nodes, node 0 isolated and node 1 joined to every other (a row of 39 or 40 terms:
    # rows of every width class). The products are the numpy path's, only the order of a row's
    # additions differs: the values within 2K·γ_m·max|x| of numpy's (m the largest
    # neighbourhood), the variances within 2γ_{M−1} of themselves (M the longest row of W),
    # with 10% for the second-order terms; a wrong weight or neighbour is off by far more.
    torch = pytest.importorskip("torch")
    xs = pytest.importorskip("array_api_strict")
    monkeypatch.setattr(dpkit._propagation, "ROWS_PER_BLOCK", 7)  # blocks split the rows
    adjacency = random_adjacency(40, 0.15, seed=steps)
    adjacency[1, 2:] = adjacency[2:, 1] = True
    rng = np.random.default_rng(9)
    x = rng.normal(size=(40, 3)) * 100.0
    sigma2 = rng.random((40, 3))
    as_device = torch.from_numpy if spell == "torch" else xs.asarray
    rows, cols = np.nonzero(np.triu(adjacency))
    graphs = [adjacency, (rows, cols), as_graph(adjacency)]
    if spell == "torch":
        graphs.append((torch.from_numpy(rows), torch.from_numpy(cols)))  # on the "device"
    for self_loops in (False, True):
        w = dense_operator(adjacency, steps, self_loops)
        m = int(np.count_nonzero(dense_operator(adjacency, 1, self_loops), axis=1).max())
        longest = int(np.count_nonzero(w, axis=1).max())
        for graph in graphs:
            for variance in (as_device(sigma2), sigma2[:, 0], 0.5):
                expected = dpkit.graph.propagate(
                    graph,
                    x,
                    steps,
                    variance=variance if np.ndim(variance) < 2 else sigma2,
                    self_loops=self_loops,
                )
                called = len(device_tensors)
                found = dpkit.graph.propagate(
                    graph, as_device(x), steps, variance=variance, self_loops=self_loops
                )
                assert len(device_tensors) == called + 1
                for array in (found.estimates, found.variance):
                    assert type(array) is type(as_device(x))
                    assert array.dtype == (torch.float64 if spell == "torch" else xs.float64)
                estimates = np.from_dlpack(found.estimates)
                variances = np.from_dlpack(found.variance)
                bound = 1.1 * 2 * steps * _gamma(m) * np.abs(x).max()
                assert np.abs(estimates - expected.estimates).max() <= bound
                assert np.all(
                    np.abs(variances - expected.variance)
                    <= 1.1 * 2 * _gamma(longest - 1) * expected.variance
                )
                np.testing.assert_allclose(estimates, w @ x, atol=1e-11)
    # the interval and the document come from the device arrays
    low, _ = found.confidence_interval(0.9)
    assert type(low) is type(found.estimates)
    document = found.to_document(confidence=0.9)
    assert document["estimate"] == np.from_dlpack(found.estimates).tolist()
    assert document["confidence_interval"]["lower"] == np.from_dlpack(low).tolist()


def test_host_tensors_take_the_numpy_path_and_keep_their_type() -> None:
    torch = pytest.importorskip("torch")
    adjacency = random_adjacency(12, 0.3, seed=1)
    x = np.random.default_rng(2).random((12, 2))
    expected = dpkit.graph.propagate(adjacency, x, 2, variance=0.25)
    found = dpkit.graph.propagate(adjacency, torch.from_numpy(x), 2, variance=0.25)
    assert isinstance(found.estimates, torch.Tensor) and isinstance(found.variance, torch.Tensor)
    assert np.array_equal(found.estimates.numpy(), expected.estimates)  # the same operations
    assert np.array_equal(found.variance.numpy(), expected.variance)
    assert np.array_equal(found.standard_error.numpy(), expected.standard_error)


@pytest.mark.usefixtures("device_tensors")
def test_the_device_path_refuses_before_reading_values(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    xs = pytest.importorskip("array_api_strict")
    adjacency = random_adjacency(5, 0.5, seed=3)
    nan = torch.full((5, 2), math.nan, dtype=torch.float64)
    cases: list[tuple[Callable[[], Any], str, str]] = [
        # the public checks come first: the values are NaN in each
        (lambda: dpkit.graph.propagate(adjacency[:4, :4], nan, 1, variance=1.0), "graph", "square"),
        (
            lambda: dpkit.graph.propagate(adjacency, nan, 1, variance=np.ones(4)),
            "variance",
            "shape",
        ),
        (lambda: dpkit.graph.propagate(adjacency, nan[:0], 1, variance=1.0), "values", "n >= 1"),
        (lambda: dpkit.graph.propagate(adjacency, nan, 1, variance="a"), "variance", "real"),
        (
            lambda: dpkit.graph.propagate(adjacency, nan, 1, variance=xs.ones((5, 2))),
            "variance",
            "device",
        ),
        (
            lambda: dpkit.graph.propagate(
                adjacency, torch.ones(5, dtype=torch.complex64), 1, variance=1.0
            ),
            "values",
            "real numbers",
        ),
        (lambda: dpkit.graph.propagate(adjacency, nan, 1, variance=1.0), "values", "finite"),
        (
            lambda: dpkit.graph.propagate(adjacency, torch.ones(5), 1, variance=torch.tensor(-1.0)),
            "variance",
            ">= 0",
        ),
    ]
    _refused_in_order(
        cases,
        monkeypatch,
        lambda: dpkit.graph.propagate(adjacency[:4, :4], nan, 1, variance=1.0),
        "values",
    )


def _refused_in_order(
    cases: list[tuple[Callable[[], Any], str, str]],
    monkeypatch: pytest.MonkeyPatch,
    before_all: Callable[[], Any],
    field: str,
) -> None:
    """Each case refused naming its field; then, with a library without 64-bit integers,
    ``before_all`` (whose other inputs are wrong too) refused for that first, naming ``field``."""
    for call, named, words in cases:
        with pytest.raises(InvalidData, match=words) as raised:
            call()
        assert raised.value.field == named
    monkeypatch.setattr(dpkit.tensors.device_random, "index_dtype", lambda xp: xp.int32)
    with pytest.raises(InvalidData, match="float64") as raised:
        before_all()
    assert raised.value.field == field


@pytest.fixture
def device_labels(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """As ``device_tensors``, recording the calls of the label path's device step."""
    from support import device_reference

    import dpkit.graph

    return device_reference.on_device(monkeypatch, [(dpkit.graph, "_device_onehot")])


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_label_distribution_on_the_device_is_the_numpy_path(
    spell: str, device_labels: list[str]
) -> None:
    # The same products as the numpy path, sums in another order: every entry (|f̂| ≤ 1/(p − q)
    # ≈ 2.6 here) within 1e-12 of numpy's; the denoised labels equal wherever the top two
    # frequencies are further apart than that.
    torch = pytest.importorskip("torch")
    xs = pytest.importorskip("array_api_strict")
    as_device = torch.from_numpy if spell == "torch" else xs.asarray
    krr = dpkit.mechanism("krr", epsilon=1.0, k=4)
    adjacency = random_adjacency(30, 0.2, seed=5)
    adjacency[1, 2:] = adjacency[2:, 1] = True
    reports = np.random.default_rng(6).integers(0, 4, size=30)
    for steps, self_loops in ((0, False), (1, False), (2, True)):
        expected = dpkit.graph.label_distribution(
            krr, adjacency, reports, steps, self_loops=self_loops
        )
        called = len(device_labels)
        found = dpkit.graph.label_distribution(
            krr, adjacency, as_device(reports), steps, self_loops=self_loops
        )
        assert len(device_labels) == called + 1
        for array in (found.estimates, found.variance):
            assert type(array) is type(as_device(reports))
        np.testing.assert_allclose(np.from_dlpack(found.estimates), expected.estimates, atol=1e-12)
        np.testing.assert_allclose(np.from_dlpack(found.variance), expected.variance, atol=1e-12)
        labels = dpkit.graph.denoised_labels(found)
        assert type(labels) is type(as_device(reports))
        ordered = np.sort(expected.estimates, axis=1)
        clear = ordered[:, -1] - ordered[:, -2] > 1e-9
        assert np.array_equal(
            np.from_dlpack(labels)[clear], dpkit.graph.denoised_labels(expected)[clear]
        )
    assert found.labels == (0, 1, 2, 3) and found.variance_kind == "unbiased"


def test_label_distribution_keeps_a_host_tensors_type() -> None:
    torch = pytest.importorskip("torch")
    krr = dpkit.mechanism("krr", epsilon=1.0, k=3)
    adjacency = random_adjacency(12, 0.3, seed=1)
    reports = np.random.default_rng(3).integers(0, 3, size=12)
    expected = dpkit.graph.label_distribution(krr, adjacency, reports, 2)
    found = dpkit.graph.label_distribution(krr, adjacency, torch.from_numpy(reports), 2)
    assert isinstance(found.estimates, torch.Tensor) and isinstance(found.variance, torch.Tensor)
    assert np.array_equal(found.estimates.numpy(), expected.estimates)  # the same operations
    assert np.array_equal(found.variance.numpy(), expected.variance)


@pytest.mark.usefixtures("device_labels")
def test_the_device_label_path_refuses_before_reading_reports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch = pytest.importorskip("torch")
    krr = dpkit.mechanism("krr", epsilon=1.0, k=3)
    labelled = dpkit.mechanism("krr", epsilon=1.0, k=3, categories=["a", "b", "c"])
    adjacency = random_adjacency(5, 0.5, seed=3)
    outside = torch.full((5,), 7)  # every report out of range: a public check must come first
    cases: list[tuple[Callable[[], Any], str, str]] = [
        (
            lambda: dpkit.graph.label_distribution(labelled, adjacency, outside, 1),
            "reports",
            "labels",
        ),
        (
            lambda: dpkit.graph.label_distribution(krr, adjacency, outside[None, :], 1),
            "reports",
            "one label per node",
        ),
        (
            lambda: dpkit.graph.label_distribution(krr, adjacency[:4, :4], outside, 1),
            "graph",
            "square",
        ),
        (lambda: dpkit.graph.label_distribution(krr, adjacency, outside, 1), "reports", "outside"),
        (
            lambda: dpkit.graph.label_distribution(krr, adjacency, torch.zeros(5), 1),
            "reports",
            "integer",
        ),
    ]
    _refused_in_order(
        cases,
        monkeypatch,
        lambda: dpkit.graph.label_distribution(krr, adjacency, outside[None, :], 1),
        "reports",
    )


def test_a_graph_without_edges_leaves_every_value_and_boolean_reports_are_indices() -> None:
    no_edges = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    x = np.array([[1.0], [-2.0], [3.0]])
    for self_loops in (False, True):
        found = dpkit.graph.propagate(no_edges, x, 2, variance=0.5, self_loops=self_loops)
        assert np.array_equal(found.estimates, x) and np.all(found.variance == 0.5)
    krr = dpkit.mechanism("krr", epsilon=1.0, k=2)
    as_bool = dpkit.graph.label_distribution(krr, no_edges, np.array([True, False, True]), 1)
    as_int = dpkit.graph.label_distribution(krr, no_edges, np.array([1, 0, 1]), 1)
    assert np.array_equal(as_bool.estimates, as_int.estimates)
