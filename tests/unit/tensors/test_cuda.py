"""The device paths on a real CUDA GPU: the caller's type, device and dtype back, the law of
randomized response in both modes, and the fused kernels drawing exactly the ChaCha20 words
their docs state. Skipped, with the reason, where there is no CUDA device."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine"),
]

from dpkit_ldp.graph_triangles import TwoRoundTriangles  # noqa: E402
from support import device_reference  # noqa: E402
from support.recorder import Recorder  # noqa: E402

import dpkit  # noqa: E402
from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData  # noqa: E402
from dpkit.tensors import bits, graph_views  # noqa: E402

KEY = bytes(range(32))
RR = dpkit.mechanism("rr", epsilon=1.0)
T32 = -(-RR._flip_threshold() // 2**32)


def _binomial_z(flips: int, trials: int, p: float) -> float:
    return (flips - trials * p) / math.sqrt(trials * p * (1 - p))


@pytest.mark.parametrize("dtype", ["uint8", "bool", "float32", "int64"])
def test_randomize_keeps_type_device_and_dtype(dtype: str) -> None:
    x = torch.randint(0, 2, (257, 3), device="cuda").to(getattr(torch, dtype))
    y = RR.randomize(x)
    assert isinstance(y, torch.Tensor) and y.device == x.device and y.dtype == x.dtype
    assert y.shape == x.shape and bool(((y == 0) | (y == 1)).all())


@pytest.mark.parametrize("rng", [None, "fast"])
def test_flip_rate_is_one_over_one_plus_e_to_epsilon(rng: str | None) -> None:
    # |z| < 5.3 under the exact law: false-positive rate 1.2e-7 per mode.
    generator = torch.Generator(device="cuda").manual_seed(7) if rng else None
    x = torch.zeros(4_000_000, dtype=torch.uint8, device="cuda")
    x[::3] = 1
    y = RR.randomize(x, rng=generator)
    flips = int((y != x).sum().item())
    assert abs(_binomial_z(flips, x.numel(), T32 / 2**32)) < 5.3


def test_secure_bits_are_the_documented_chacha20_words() -> None:
    n = 70_001
    x = torch.randint(0, 2, (n,), dtype=torch.uint8, device="cuda")
    y = RR.randomize(x, rng=SecureRandom.from_key(KEY))
    words = device_reference.fused_bits_words(device_reference.call_key(KEY), n, bits._LANES)
    expected = x.cpu().numpy() ^ (words < T32).astype(np.uint8)
    assert np.array_equal(y.cpu().numpy(), expected)


def test_secure_graph_draws_each_pair_once_from_the_documented_words() -> None:
    n = 150
    upper = torch.triu(torch.rand(n, n, device="cuda") < 0.2, 1)
    adjacency = (upper | upper.T).to(torch.uint8)
    noisy = RR.randomize_graph(adjacency, rng=SecureRandom.from_key(KEY))
    words = device_reference.fused_graph_words(device_reference.call_key(KEY), n, bits._TILE)
    a = adjacency.cpu().numpy()
    expected = np.triu(a ^ (words < T32).astype(np.uint8), 1)
    expected = expected + expected.T
    assert np.array_equal(noisy.cpu().numpy(), expected)


@pytest.mark.parametrize("rng", [None, "fast"])
def test_graph_flip_rate_symmetry_and_diagonal(rng: str | None) -> None:
    # |z| < 5.3: false-positive rate 1.2e-7 per mode.
    generator = torch.Generator(device="cuda").manual_seed(3) if rng else None
    n = 3000
    adjacency = torch.zeros(n, n, dtype=torch.bool, device="cuda")
    noisy = RR.randomize_graph(adjacency, rng=generator)
    assert noisy.dtype == torch.bool and torch.equal(noisy, noisy.T)
    assert not bool(noisy.diagonal().any())
    pairs = n * (n - 1) // 2
    flips = int(torch.triu(noisy, 1).sum().item())
    assert abs(_binomial_z(flips, pairs, T32 / 2**32)) < 5.3


@pytest.mark.parametrize("rng", [None, "fast"])
def test_packed_and_coo_graphs_are_the_dense_graph_of_the_same_key(
    rng: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bits, "_BAND_ELEMENTS", 1)  # 64-row bands: three of them
    n = 150
    upper = torch.triu(torch.rand(n, n, device="cuda") < 0.2, 1)
    adjacency = (upper | upper.T).to(torch.uint8)

    def run(output: str) -> object:
        generator = torch.Generator(device="cuda").manual_seed(3) if rng else None
        key = generator or SecureRandom.from_key(KEY)
        return RR.randomize_graph(adjacency, rng=key, output=output)

    dense = run("dense").cpu().numpy()
    packed = run("packed")
    assert packed.device == adjacency.device and packed.dtype == torch.uint8
    assert np.array_equal(np.unpackbits(packed.cpu().numpy(), axis=1, count=n), dense)
    rows, cols = run("coo")
    assert rows.device == adjacency.device and rows.dtype == torch.int64
    expected = np.nonzero(np.triu(dense, 1))
    assert np.array_equal(rows.cpu().numpy(), expected[0])
    assert np.array_equal(cols.cpu().numpy(), expected[1])
    indptr, indices = (part.cpu().numpy() for part in run("csr"))
    assert indptr.shape == (n + 1,) and indptr[-1] == indices.size
    for i in range(n):
        assert np.array_equal(indices[indptr[i] : indptr[i + 1]], np.flatnonzero(dense[i]))


def test_non_binary_values_on_the_device_are_refused() -> None:
    with pytest.raises(InvalidData, match="0 or 1"):
        RR.randomize(torch.tensor([0, 1, 2], device="cuda"))
    with pytest.raises(InvalidData, match="not symmetric"):
        RR.randomize_graph(torch.tensor([[0, 1], [0, 0]], device="cuda"))


@pytest.mark.parametrize("name", ["graph_rr", "graph_arr"])
def test_neighbour_list_bits_stay_on_cuda_and_are_the_hosts_on_the_same_words(name: str) -> None:
    # Bit i takes the 64-bit word of keystream words 2i (high) and 2i + 1 (low): the host's
    # sampler fed those words gives the same bits. Then the channel's rates in both modes,
    # |z| < 5.3 for each of p₁ and p₀: false-positive rate 2.4e-7 per mode.
    params = {"mu": 0.3} if name == "graph_arr" else {}
    mech = dpkit.mechanism(name, epsilon=1.0, nodes=7, **params)
    lists = torch.randint(0, 2, (33, 7), dtype=torch.uint8, device="cuda")
    got = mech.randomize(lists, rng=SecureRandom.from_key(KEY))
    assert got.device == lists.device and got.dtype == torch.bool and got.shape == lists.shape
    w = device_reference.stream(device_reference.call_key(KEY), 29).reshape(-1)[: 2 * 33 * 7]
    w = w.astype(np.uint64)
    words64 = (w[0::2] << np.uint64(32)) | w[1::2]
    host = mech.randomize(lists.cpu().numpy(), rng=device_reference.replaying(words64))
    assert np.array_equal(got.cpu().numpy(), host)
    one, zero = (t / 2.0**64 for t in mech._thresholds())
    truth = torch.zeros(2_000_000, dtype=torch.bool, device="cuda")
    truth[::2] = True
    for rng in (None, torch.Generator(device="cuda").manual_seed(5)):
        noisy = mech.randomize(truth, rng=rng)
        assert noisy.device == truth.device
        ones = int(noisy[::2].sum().item())
        zeros = int(noisy[1::2].sum().item())
        assert abs(_binomial_z(ones, 1_000_000, one)) < 5.3
        assert abs(_binomial_z(zeros, 1_000_000, zero)) < 5.3


def test_keystream_kernel_matches_the_portable_chacha20() -> None:
    # The raw keystream kernel against the portable reference (which test_chacha checks
    # against OpenSSL and RFC 8439), across the 32-bit counter word.
    import array_api_compat.numpy as xnp

    from dpkit.tensors import _kernels
    from dpkit.tensors.chacha import chacha20_words, key_words

    key = key_words(bytes(range(32)))
    key_tensor = torch.tensor(
        [w - 2**32 if w >= 2**31 else w for w in key], dtype=torch.int32, device="cuda"
    )
    out = torch.empty(16 * 300, dtype=torch.int64, device="cuda")
    first = 2**32 - 5  # crosses the 32-bit counter word
    _kernels.keystream_kernel[(3,)](key_tensor, out, first, 300, LANES=128)
    expected = np.stack(chacha20_words(xnp, key, first, 300), axis=1).reshape(-1)
    assert np.array_equal(out.cpu().numpy(), expected)


@pytest.mark.parametrize("rng", [None, "fast"])
def test_krr_on_cuda_keeps_type_and_has_the_exact_law(rng: str | None) -> None:
    # Chi-square against the exact pmf (λ rounded up to the 32-bit grid): p > 1e-6, a
    # false-positive rate of 1e-6 per mode.
    from scipy import stats

    from dpkit.plugin import lie_threshold
    from dpkit.tensors.device_random import threshold32

    krr = dpkit.mechanism("krr", epsilon=1.0, k=5)
    generator = torch.Generator(device="cuda").manual_seed(2) if rng else None
    x = torch.full((200_000,), 3, dtype=torch.int32, device="cuda")
    y = krr.randomize(x, rng=generator)
    assert isinstance(y, torch.Tensor) and y.device == x.device and y.dtype == x.dtype
    lie = threshold32(lie_threshold(1.0, 5)) / 2**32
    expected = np.full(5, lie / 4)
    expected[3] = 1 - lie
    counts = dpkit.load_registry().estimator(krr).accumulate(y).counts
    assert stats.chisquare(counts, expected * x.numel()).pvalue > 1e-6


@pytest.mark.parametrize("rng", [None, "fast"])
def test_olh_and_hr_on_cuda_stay_there_and_either_estimator_counts_them(rng: str | None) -> None:
    # Deterministic given the reports: the device counts equal the CPU estimator's on a copy.
    registry = dpkit.load_registry()
    for name in ("olh", "hr"):
        mechanism = dpkit.mechanism(name, epsilon=1.0, k=50)
        x = torch.randint(0, 50, (3000,), device="cuda")
        generator = torch.Generator(device="cuda").manual_seed(3) if rng else None
        reports = mechanism.randomize(x, rng=generator)
        assert isinstance(reports, torch.Tensor) and reports.device == x.device
        estimator = registry.estimator(mechanism)
        on_device = estimator.accumulate(reports)
        on_host = estimator.accumulate(reports.cpu())
        assert on_device.n == on_host.n == 3000
        assert np.array_equal(on_device.counts, on_host.counts)


class _CudaRecording(device_reference.RecordingWords):
    """A call's DeviceWords on CUDA that keeps every word it hands out (copied to the host)."""

    def take(self, count: int) -> Any:
        out = self.real.take(count)
        self.taken.append(out.cpu().numpy().astype(np.uint64))
        return out


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[_CudaRecording]:
    """Every draw of words by :mod:`dpkit.tensors.graph_views`, recorded in order."""
    recordings: list[_CudaRecording] = []
    real = graph_views.device_words

    def recorded(*args: Any, **kwargs: Any) -> Any:
        recordings.append(_CudaRecording(real(*args, **kwargs)))
        return recordings[-1]

    monkeypatch.setattr(graph_views, "device_words", recorded)
    return recordings


def test_graph_views_stay_on_cuda_and_are_the_hosts_on_the_same_words(
    calls: list[_CudaRecording],
) -> None:
    # graph_arr's view in the "both" form on a batch of matrices, the two-round triangle view
    # on 50 copies of the complete graph (degrees above D = 2): the host's views fed the
    # device's words give the same output; the coercion of NaN entries stays there too.
    view = dpkit.mechanism("graph_arr", epsilon=1.0, nodes=6, mu=0.3, pairs="both").on_graphs()
    graphs = torch.randint(0, 2, (4, 6, 6), dtype=torch.uint8, device="cuda")
    got = view.randomize(graphs, rng=SecureRandom.from_key(KEY))
    assert got.device == graphs.device and got.dtype == torch.bool and got.shape == (4, 30)
    host = view.randomize(graphs.cpu().numpy(), rng=device_reference.replaying(calls[-1].words64()))
    assert np.array_equal(got.cpu().numpy(), host)
    protocol = TwoRoundTriangles(epsilon1=1.0, epsilon2=1.0, nodes=6, max_degree=2)
    complete = torch.ones((6, 6), dtype=torch.int64, device="cuda") - torch.eye(
        6, dtype=torch.int64, device="cuda"
    )
    batch = complete.expand(50, 6, 6).contiguous()
    released = protocol.on_graphs().randomize(batch, rng=SecureRandom.from_key(KEY))
    assert released.device == batch.device and released.dtype == torch.float64
    replay = device_reference.replaying(calls[-1].words64())
    host = protocol.on_graphs().randomize(batch.cpu().numpy(), rng=replay)
    assert np.array_equal(released.cpu().numpy(), host)
    coerced = view.coerce(torch.full((2, 6, 6), float("nan"), device="cuda"))
    assert coerced.device == batch.device and coerced.dtype == torch.int64
    assert torch.equal(coerced, coerced.transpose(1, 2))


def test_graph_mechanisms_randomize_a_cuda_graph_there(calls: list[_CudaRecording]) -> None:
    # graph_arr's packed reports stay on CUDA and are the host's on the same words; the edge
    # estimate reads them there; graph_degree's releases are int64 on CUDA.
    n = 40
    upper = torch.triu(torch.rand(n, n, device="cuda") < 0.3, 1)
    adjacency = (upper | upper.T).to(torch.uint8)
    arr = dpkit.mechanism("graph_arr", epsilon=1.0, nodes=n, mu=0.3, output="packed")
    reports = arr.randomize_graph(adjacency, rng=SecureRandom.from_key(KEY))
    assert reports.matrix.device == adjacency.device and reports.matrix.dtype == torch.uint8
    replay = device_reference.replaying(calls[-1].words64())
    host = arr.randomize_graph(adjacency.cpu().numpy(), rng=replay)
    assert np.array_equal(reports.matrix.cpu().numpy(), host.matrix)
    assert dpkit.graph.edge_count(arr, reports).value == dpkit.graph.edge_count(arr, host).value
    degree = dpkit.mechanism("graph_degree", epsilon=1.0, nodes=n)
    released = degree.randomize_graph(adjacency)
    assert released.device == adjacency.device and released.dtype == torch.int64
    assert dpkit.graph.degrees(degree, released).estimates.shape == (n,)


def test_a_method_without_a_device_path_refuses_a_cuda_tensor_by_name() -> None:
    # a plugin's mechanism that declares no device path (every built-in has one)
    with pytest.raises(
        InvalidData, match=r"recorder\.log_probability has no device path yet"
    ) as refused:
        Recorder().log_probability(torch.zeros(3, dtype=torch.int64, device="cuda"), [0, 1, 1])
    assert refused.value.field == "outputs"


@pytest.mark.parametrize("name", ["exponential", "permute_and_flip"])
def test_a_selection_scores_cuda_utilities_there_within_the_bound(name: str) -> None:
    # CUDA's exp, log and log1p (1 ulp from the correctly rounded result by the CUDA C++
    # Programming Guide's table) and its summation order: within docs/tensors.md's bound.
    mechanism = dpkit.mechanism(name, epsilon=1.3)
    rng = np.random.default_rng(4)
    utilities = rng.normal(size=(500, 33)) * np.logspace(-3, 6, 500)[:, None]
    utilities[::7, ::3] = -np.inf
    outputs = np.arange(-1, 35)[:, None]
    expected = mechanism.log_probability(outputs, utilities)
    got = mechanism.log_probability(torch.from_numpy(outputs).cuda(), utilities)
    assert got.device.type == "cuda" and got.dtype == torch.float64
    tolerance = getattr(device_reference, f"{name}_tolerance")(utilities, mechanism.rate)
    index = np.clip(outputs[:, 0], 0, 32)
    device_reference.assert_selection_log_agrees(got.cpu().numpy(), expected, tolerance[:, index].T)


def test_report_noisy_max_scores_cuda_utilities_there_within_the_bound() -> None:
    # The host's expansion, branch-free, with CUDA's exp, expm1 and log and its summation
    # order: within docs/tensors.md's bound, which grows with the expansion's cancellation.
    mechanism = dpkit.mechanism("report_noisy_max", epsilon=1.3)
    rng = np.random.default_rng(5)
    utilities = rng.normal(size=(60, 12)) * np.logspace(-3, 5, 60)[:, None]
    utilities[::5, ::4] = -np.inf
    utilities[1::5, :6] = 2.0  # ties
    outputs = np.arange(-1, 14)[:, None]
    expected = mechanism.log_probability(outputs, utilities)
    got = mechanism.log_probability(torch.from_numpy(outputs).cuda(), utilities)
    assert got.device.type == "cuda" and got.dtype == torch.float64
    tolerance = device_reference.report_noisy_max_tolerance(utilities, mechanism.scale)
    assert np.isfinite(tolerance).all()
    index = np.clip(outputs[:, 0], 0, 11)
    device_reference.assert_selection_log_agrees(got.cpu().numpy(), expected, tolerance[:, index].T)


@pytest.mark.parametrize(
    ("name", "parameters"),
    [
        ("duchi", {"lower": -2.0, "upper": 3.0}),
        ("duchi_multi", {"dimension": 3}),
        ("one_bit_mean", {"lower": 0.0, "upper": 2.0, "intervals": 3}),
    ],
)
@pytest.mark.parametrize("epsilon", [0.8, 700.0])
def test_the_logarithm_of_the_input_on_cuda_is_within_two_ulps_of_the_hosts(
    name: str, parameters: dict[str, float], epsilon: float
) -> None:
    # The probability by the host's operations, its log by CUDA's (1 ulp from the correctly
    # rounded result by the CUDA C++ Programming Guide's table), numpy's within 1 ulp of it:
    # two ulps apart at most; −inf, NaN and 0 where the host has them.
    mechanism = dpkit.mechanism(name, epsilon=epsilon, **parameters)
    lower, upper = mechanism.lower, mechanism.upper
    ends = np.array([[lower], [upper], [lower - 1.0], [upper + 4.0], [np.nan]])
    width = 3 if name == "duchi_multi" else 1
    drawn = np.random.default_rng(3).uniform(lower, upper, (20_000, width))
    x = np.concatenate([ends * np.ones(width), drawn])
    if name == "duchi_multi":
        x = x[:, None, :]
        outputs = np.concatenate([mechanism.output_space(), np.zeros((1, 3))])
    elif name == "duchi":
        outputs = np.concatenate([mechanism.output_space(), [0.0, np.nan]])
    else:
        outputs = np.array([0.0, 1.0, 2.0, np.nan])
    expected = mechanism.log_probability(outputs, x)
    got = mechanism.log_probability(torch.from_numpy(outputs).cuda(), torch.from_numpy(x).cuda())
    assert got.device.type == "cuda" and got.dtype == torch.float64
    device_reference.assert_log_agrees(got.cpu().numpy(), expected)


def test_log_probability_scores_a_cuda_tensor_there_as_the_host_does() -> None:
    outputs = torch.tensor([0, 1, 2], device="cuda")
    got = RR.log_probability(outputs, torch.tensor([[0], [1]], device="cuda"))
    assert got.device == outputs.device and got.dtype == torch.float64
    expected = RR.log_probability(np.array([0, 1, 2]), np.array([[0], [1]]))
    assert np.array_equal(got.cpu().numpy(), expected)
    with pytest.raises(InvalidData, match="give both on one device") as refused:
        RR.log_probability(outputs, torch.tensor([0, 1, 2]))  # a CPU tensor beside it
    assert refused.value.field == "inputs"


@pytest.mark.parametrize("rng", [None, "fast"])
@pytest.mark.parametrize("name", ["report_noisy_max", "exponential", "permute_and_flip"])
def test_selections_on_cuda_stay_there_and_have_their_laws(name: str, rng: str | None) -> None:
    # 100 000 selections among (0, 1, −inf, 2.5) at ε = 1 against the exact selection
    # probabilities: χ² p-value > 1e-6 (a false alarm with probability 1e-6 per case).
    from dpkit_central import noisy_max
    from scipy import stats

    utilities = np.array([0.0, 1.0, -np.inf, 2.5])
    mechanism = dpkit.mechanism(name, epsilon=1.0)
    batch = torch.from_numpy(np.tile(utilities, (100_000, 1))).cuda()
    generator = None if rng is None else torch.Generator(device="cuda").manual_seed(3)
    chosen = mechanism.randomize(batch, rng=generator)
    assert chosen.device == batch.device and chosen.dtype == torch.int64
    if name == "report_noisy_max":
        log_pmf = (
            noisy_max.secure_report_noisy_max_log_pmf(utilities, epsilon=1.0)
            if rng is None
            else noisy_max.report_noisy_max_log_pmf(utilities, mechanism.scale)
        )
    elif name == "exponential":
        log_pmf = mechanism.log_probability(np.arange(4), utilities)
    else:
        log_pmf = noisy_max.permute_and_flip_log_pmf(utilities, mechanism.rate)
    counts = np.bincount(chosen.cpu().numpy(), minlength=4)
    p = np.exp(log_pmf)
    assert counts[2] == 0 and p[2] == 0
    keep = p > 0
    expected = p[keep] / p[keep].sum() * counts.sum()
    assert stats.chisquare(counts[keep], expected).pvalue > 1e-6


@pytest.mark.parametrize(
    ("name", "parameters"),
    [("pm", {"lower": -2.0, "upper": 3.0}), ("sw", {}), ("hr", {"k": 6}), ("olh", {"k": 6})],
)
def test_a_density_a_parity_and_a_hash_are_scored_on_cuda_as_the_host_does(
    name: str, parameters: dict[str, float]
) -> None:
    mechanism = dpkit.mechanism(name, epsilon=1.0, **parameters)
    if name == "hr":
        outputs, inputs = np.arange(8), np.arange(6)[:, None]
    elif name == "olh":  # reports of every category, scored against each: the host's hash
        outputs = mechanism.randomize(np.repeat(np.arange(6), 50), rng=np.random.default_rng(3))
        inputs = np.arange(6)[:, None]
    else:  # reports drawn by the mechanism, and a grid through and beyond their range
        inputs = np.linspace(mechanism.lower, mechanism.upper, 33)[:, None]
        drawn = mechanism.randomize(np.repeat(inputs[:, 0], 8), rng=np.random.default_rng(3))
        outputs = np.concatenate([drawn, np.linspace(-12.0, 12.0, 97)])
    expected = mechanism.log_probability(outputs, inputs)
    got = mechanism.log_probability(torch.from_numpy(outputs).cuda(), inputs)
    assert got.device.type == "cuda" and got.dtype == torch.float64
    assert np.array_equal(got.cpu().numpy(), expected)


@pytest.mark.parametrize(
    ("name", "parameters"),
    [
        ("pem", {"epsilon": 1.5, "bits": 64, "top": 5, "step": 16}),
        ("treehist", {"epsilon": 1.5, "bits": 64, "step": 16}),
        ("rappor", {"bits": 70, "hashes": 2, "cohorts": 3, "reports": 2, "key": "ab" * 16}),
    ],
)
def test_telemetry_reports_are_scored_on_cuda_as_the_host_does(
    name: str, parameters: dict[str, Any]
) -> None:
    # pem and treehist: the host's constants chosen by the host's hash and parities, to the bit;
    # rappor: CUDA's logaddexp and sum, within docs/tensors.md's bound; −inf where the host's is.
    mechanism = dpkit.mechanism(name, **parameters)
    rng = np.random.default_rng(3)
    if name == "rappor":
        items = rng.integers(-(2**62), 2**62, 64)
    else:
        items = rng.integers(0, 2**64 - 1, 64, dtype=np.uint64, endpoint=True)
    on_cuda = torch.from_numpy(items).cuda()
    reports = mechanism.randomize(on_cuda, rng=SecureRandom.from_key(KEY))
    outputs = reports.view(torch.int64).cpu().numpy()[:, None]
    outputs[-1, ..., 0] = 1 << 40  # a round, level or cohort out of range
    got = mechanism.log_probability(torch.from_numpy(outputs).cuda(), on_cuda[:8])
    assert got.device == on_cuda.device and got.dtype == torch.float64
    expected = mechanism.log_probability(outputs, items[:8])
    assert np.isneginf(expected[-1]).all() and np.isfinite(expected[:-1]).all()
    if name == "rappor":
        device_reference.assert_sum_of_logaddexp_agrees(
            got.cpu().numpy(), expected, terms=70, constant=math.log(3)
        )
    else:
        assert np.array_equal(got.cpu().numpy(), expected)


def test_the_sgd_noise_step_stays_on_cuda_in_place() -> None:
    """add_gaussian_noise_ on CUDA gradients: in place, on the device, on the planned lattice;
    the noise's variance by a z-test at |z| < 6 (false-positive rate 2e-9)."""
    from dpkit_central import add_gaussian_noise_
    from dpkit_central.gaussian import LatticeGaussian

    n, std = 1_000_000, 3.0
    grads = [torch.zeros(n, device="cuda"), torch.zeros(10, device="cuda", dtype=torch.float64)]
    add_gaussian_noise_(grads, std, sensitivity=1.0)
    assert all(g.device.type == "cuda" for g in grads)
    assert [g.dtype for g in grads] == [torch.float32, torch.float64]
    plan = LatticeGaussian.plan(std, 1.0, n + 10)
    steps = grads[1].cpu().numpy() / plan.step
    assert np.array_equal(steps, np.round(steps))
    noise = grads[0].double()
    z = (float(noise.var()) - plan.noise_std**2) / (plan.noise_std**2 * math.sqrt(2 / (n - 1)))
    assert abs(z) < 6
