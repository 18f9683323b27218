"""The statistical auditor, unchanged, over the device paths (run on the CPU with torch tensors
treated as an accelerator's): rr, krr, sue, oue, olh, hr, duchi, duchi_multi, multibit, pm, hm,
pm_multi, hm_multi, sw, graph_degree, graph_kstar, graph_rr, graph_arr, laplace, geometric, gaussian,
report_noisy_max, exponential, permute_and_flip, dbitflip, one_bit_mean, cms, hcms, rappor (on integer items), pem and treehist keep their privacy in both randomness modes, and a device
path that rounds its flip (or lie) probability the wrong way, or draws too little noise, is
caught, as is a secure selection whose coins are too steep.

False-positive rate: the auditor's own, CHECK_ALPHA (1e-6) per audit: a passing mechanism is
reported as violating with at most that probability (dpkit.testing); the seeds are fixed.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dpkit_central import exponential, gaussian, geometric, laplace, noisy_max  # noqa: E402
from dpkit_ldp import (  # noqa: E402
    _adjacency,
    count_mean_sketch,
    dbitflip,
    duchi,
    graph_arr,
    graph_degree,
    graph_features,
    graph_rr,
    graph_triangles,
    hadamard,
    hybrid,
    kary_rr,
    local_hashing,
    one_bit_mean,
    pem,
    piecewise,
    randomized_response,
    rappor,
    sampled,
    square_wave,
    treehist,
    unary_encoding,
)
from dpkit_ldp.items import ItemDomain  # noqa: E402
from support import device_reference  # noqa: E402

import dpkit  # noqa: E402
from dpkit.tensors import exact, graph_views, selection  # noqa: E402
from dpkit.tensors import noise as exact_noise  # noqa: E402
from dpkit.testing import CHECK_ALPHA, audit, check_mechanism  # noqa: E402
from dpkit.testing.report import DPViolation  # noqa: E402


@pytest.fixture
def device_tensors(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """torch CPU tensors take the device path (as a CUDA tensor would, without Triton); the
    list holds the device functions called, which the tests check are the ones audited."""
    counted = [
        (randomized_response, "flip_bits"),
        (kary_rr, "kary_response"),
        (unary_encoding, "unary_reports"),
        (local_hashing, "hashed_reports"),
        (hadamard, "hadamard_reports"),
        (duchi, "duchi_reports"),
        (duchi, "duchi_multi_reports"),
        (graph_features, "multibit_reports"),
        (graph_degree, "noisy_list_counts"),
        (_adjacency, "noisy_list_bits"),
        (_adjacency, "relationship_bits"),
        (graph_triangles, "two_round_reports"),
        (piecewise, "piecewise_reports"),
        (hybrid, "hybrid_reports"),
        (sampled, "piecewise_multi_reports"),
        (sampled, "hybrid_multi_reports"),
        (square_wave, "square_wave_reports"),
        (laplace, "laplace_noise"),
        (geometric, "geometric_noise"),
        (gaussian, "gaussian_noise"),
        (noisy_max, "report_noisy_max_indices"),
        (noisy_max, "permute_and_flip_indices"),
        (exponential, "exponential_indices"),
        (dbitflip, "dbitflip_reports"),
        (one_bit_mean, "one_bit_reports"),
        (count_mean_sketch, "sketch_reports"),
        (count_mean_sketch, "hadamard_sketch_reports"),
        (rappor, "rappor_reports"),
        (pem, "prefix_reports"),
        (treehist, "tree_reports"),
    ]
    return device_reference.on_device(monkeypatch, counted)


@attrs.frozen
class _IntegerItems(ItemDomain):
    """Items on a device are integers (the items of their decimal text): the auditor's pairs
    and neighbours drawn among them."""

    def pairs(self) -> list[tuple[Any, Any]]:
        found = [(0, 1), (7, -123456789), (10**18, -1)]
        return [pair for a, b in found for pair in ((a, b), (b, a))]

    def neighbours(self, rng: np.random.Generator, n: int) -> list[tuple[Any, Any]]:
        drawn = rng.integers(-(10**6), 10**6, size=(max(n, 0), 2))
        return [(int(a), int(b) if b != a else int(b) + 1) for a, b in drawn]


@attrs.frozen
class _IntegerSketch(count_mean_sketch.CountMeanSketch):
    name: ClassVar[str] = "cms_integer_items"

    @property
    def domain(self) -> ItemDomain:
        return _IntegerItems()


@attrs.frozen
class _IntegerHadamardSketch(count_mean_sketch.HadamardCountMeanSketch):
    name: ClassVar[str] = "hcms_integer_items"

    @property
    def domain(self) -> ItemDomain:
        return _IntegerItems()


@attrs.frozen
class _IntegerRappor(rappor.Rappor):
    name: ClassVar[str] = "rappor_integer_items"

    @property
    def domain(self) -> ItemDomain:
        return _IntegerItems()


def _through_tensors(cls: type) -> type:
    """``cls`` whose randomize sends each batch through a torch tensor and back."""

    @attrs.frozen
    class Tensored(cls):  # type: ignore[misc, valid-type]
        name: ClassVar[str] = f"{cls.name}_tensored"

        def randomize(self, values: Any, /, *, rng: Any = None) -> Any:
            out = super().randomize(torch.from_numpy(np.ascontiguousarray(values)), rng=rng)
            assert isinstance(out, torch.Tensor)
            return out.view(torch.int64).numpy() if out.dtype == torch.uint64 else out.numpy()

    return Tensored


@pytest.mark.parametrize(
    ("cls", "params", "device_function"),
    [
        (randomized_response.RandomizedResponse, {"epsilon": 1.0}, "flip_bits"),
        (kary_rr.KaryRandomizedResponse, {"epsilon": 1.0, "k": 4}, "kary_response"),
        (unary_encoding.SymmetricUnaryEncoding, {"epsilon": 1.0, "k": 4}, "unary_reports"),
        (unary_encoding.OptimizedUnaryEncoding, {"epsilon": 1.0, "k": 4}, "unary_reports"),
        (local_hashing.OptimalLocalHashing, {"epsilon": 1.0, "k": 4}, "hashed_reports"),
        (hadamard.HadamardResponse, {"epsilon": 1.0, "k": 4}, "hadamard_reports"),
        (duchi.Duchi, {"epsilon": 1.0, "lower": -2.0, "upper": 5.0}, "duchi_reports"),
        (
            duchi.DuchiMulti,
            {"epsilon": 1.0, "lower": 0.0, "upper": 1.0, "dimension": 2},
            "duchi_multi_reports",
        ),
        (
            graph_features.MultiBit,
            {"epsilon": 1.0, "lower": -2.0, "upper": 5.0, "dimension": 2, "k": 1},
            "multibit_reports",
        ),
        (piecewise.Piecewise, {"epsilon": 1.0, "lower": -2.0, "upper": 5.0}, "piecewise_reports"),
        (hybrid.Hybrid, {"epsilon": 1.0, "lower": -2.0, "upper": 5.0}, "hybrid_reports"),
        (
            sampled.PiecewiseMulti,
            {"epsilon": 1.0, "lower": -2.0, "upper": 5.0, "dimension": 2, "k": 1},
            "piecewise_multi_reports",
        ),
        (
            sampled.HybridMulti,
            {"epsilon": 2.0, "lower": -2.0, "upper": 5.0, "dimension": 2, "k": 2},
            "hybrid_multi_reports",
        ),
        (square_wave.SquareWave, {"epsilon": 1.0, "bins": 16}, "square_wave_reports"),
        (graph_degree.NoisyDegree, {"epsilon": 1.0, "nodes": 4}, "noisy_list_counts"),
        (
            graph_degree.LocalKStars,
            {"epsilon": 1.0, "nodes": 4, "max_degree": 2, "k": 2},
            "noisy_list_counts",
        ),
        (graph_rr.GraphRandomizedResponse, {"epsilon": 1.0, "nodes": 3}, "noisy_list_bits"),
        (
            graph_arr.AsymmetricRandomizedResponse,
            {"epsilon": 1.0, "nodes": 3, "mu": 0.4},
            "noisy_list_bits",
        ),
        (laplace.Laplace, {"epsilon": 1.0}, "laplace_noise"),
        (geometric.Geometric, {"epsilon": 1.0}, "geometric_noise"),
        (gaussian.Gaussian, {"epsilon": 1.0, "delta": 1e-5}, "gaussian_noise"),
        (dbitflip.DBitFlip, {"epsilon": 1.0, "k": 3, "d": 2}, "dbitflip_reports"),
        (
            one_bit_mean.OneBitMean,
            {"epsilon": 1.0, "lower": 0.0, "upper": 2.0, "intervals": 2},
            "one_bit_reports",
        ),
        (
            _IntegerSketch,
            {"epsilon": 1.5, "width": 2, "hashes": 2, "key": "c3" * 16},
            "sketch_reports",
        ),
        (
            _IntegerHadamardSketch,
            {"epsilon": 1.5, "width": 2, "hashes": 2, "key": "c3" * 16},
            "hadamard_sketch_reports",
        ),
        (
            _IntegerRappor,
            {"bits": 2, "hashes": 1, "cohorts": 1, "key": "c3" * 16},
            "rappor_reports",
        ),
        (
            pem.PrefixExtendingMethod,
            {"epsilon": 1.5, "bits": 4, "top": 1, "step": 2},
            "prefix_reports",
        ),
        (
            treehist.TreeHist,
            {"epsilon": 1.5, "bits": 2, "top": 1, "step": 1},
            "tree_reports",
        ),
    ],
)
def test_device_paths_keep_their_epsilon_in_both_modes(
    cls: type, params: dict, device_function: str, device_tensors: list[str]
) -> None:
    # Laplace's and Gaussian's secure draws take about ten keystream words each (ChaCha20 in torch
    # operations on this CPU), duchi_multi's audit has many input pairs, and pm's, hm's and sw's
    # lattice releases take several rounds of draws per call (pm_multi's and hm_multi's after
    # their attribute draw): fewer samples; the auditor's false-alarm rate is the same.
    samples = 3_000 if cls in (laplace.Laplace, gaussian.Gaussian, duchi.DuchiMulti) else 20_000
    if cls in (piecewise.Piecewise, hybrid.Hybrid, square_wave.SquareWave):
        samples = 10_000
    if cls in (sampled.PiecewiseMulti, sampled.HybridMulti):
        samples = 3_000
    (report,) = check_mechanism(_through_tensors(cls)(**params), samples=samples)
    assert report.verdicts == {"fast": "pass", "secure": "pass"}
    assert device_function in device_tensors


@pytest.mark.parametrize(
    ("cls", "device_function"),
    [
        (noisy_max.ReportNoisyMax, "report_noisy_max_indices"),
        (exponential.Exponential, "exponential_indices"),
        (noisy_max.PermuteAndFlip, "permute_and_flip_indices"),
    ],
)
def test_device_selections_keep_their_epsilon(
    cls: type, device_function: str, device_tensors: list[str]
) -> None:
    # Few samples: the secure draws take several keystream words each (ChaCha20 in torch
    # operations on this CPU); the auditor's false-alarm rate is the same.
    (report,) = check_mechanism(_through_tensors(cls)(epsilon=1.0), samples=2_000)
    assert report.verdicts == {"fast": "pass", "secure": "pass"}
    assert device_function in device_tensors


@pytest.mark.parametrize(
    ("cls", "device_function"),
    [
        (exponential.Exponential, "exponential_indices"),
        (noisy_max.PermuteAndFlip, "permute_and_flip_indices"),
    ],
)
def test_a_secure_device_selection_with_steep_coins_is_caught(
    cls: type, device_function: str, device_tensors: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The secure coins Bernoulli(e^(−γ)) at twice the gap λ(u* − u) under a claim of
    # ε = 1 (the mechanism at ε = 2): refused.
    real = selection.exp_coins
    monkeypatch.setattr(
        selection, "exp_coins", lambda pairs, u, top, rate, *a: real(pairs, u, top, 2 * rate, *a)
    )
    with pytest.raises(DPViolation):
        check_mechanism(_through_tensors(cls)(epsilon=1.0), samples=2_000, modes=("secure",))
    assert device_function in device_tensors


def test_a_device_selection_with_too_little_noise_is_caught(
    device_tensors: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Secure report-noisy-max's discrete Laplace at a third of its scale under a claim of
    # ε = 1: refused.
    mechanism = _through_tensors(noisy_max.ReportNoisyMax)(epsilon=1.0)
    real = exact.discrete_laplace
    monkeypatch.setattr(
        selection, "discrete_laplace", lambda pairs, rate, n: real(pairs, 3 * rate, n)
    )
    with pytest.raises(DPViolation):
        check_mechanism(mechanism, samples=2_000, modes=("secure",))
    assert "report_noisy_max_indices" in device_tensors


def test_a_device_path_wrong_only_for_rng_none_is_caught(
    device_tensors: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Geometric's device noise at a quarter of its scale only when rng is None (the default
    # spelling of secure mode), right for a SecureRandom passed: the auditor samples both
    # spellings in secure mode, so it refuses it (it passed when only the keyed generator was
    # passed as rng).
    real = geometric.geometric_noise

    def default_too_narrow(library: Any, values: Any, *, scale: Any, rng: Any, **kw: Any) -> Any:
        return real(library, values, scale=scale / 4 if rng is None else scale, rng=rng, **kw)

    monkeypatch.setattr(geometric, "geometric_noise", default_too_narrow)
    mechanism = _through_tensors(geometric.Geometric)(epsilon=1.0)
    with pytest.raises(DPViolation, match=r"secure mode"):
        check_mechanism(mechanism, samples=3_000, modes=("secure",))


@pytest.mark.usefixtures("device_tensors")
def test_a_device_path_that_keeps_too_often_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # The flip threshold of ε = 3 under a claim of ε = 1: the auditor must refuse it.
    rr = _through_tensors(randomized_response.RandomizedResponse)(epsilon=1.0)
    too_small = dpkit.plugin.lie_threshold(3.0, 2)
    monkeypatch.setattr(type(rr), "_flip_threshold", lambda self: too_small)
    with pytest.raises(DPViolation):
        check_mechanism(rr, samples=20_000)


@pytest.mark.usefixtures("device_tensors")
def test_a_vector_device_path_with_heads_too_often_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # duchi_multi's heads threshold of ε = 3 under a claim of ε = 1 (secure mode's; fast
    # mode's float π_d is left right): the auditor must refuse it.
    mechanism = _through_tensors(duchi.DuchiMulti)(epsilon=1.0, lower=0.0, upper=1.0, dimension=2)
    real = duchi._heads_threshold
    monkeypatch.setattr(duchi, "_heads_threshold", lambda epsilon, d: real(3.0, d))
    with pytest.raises(DPViolation):
        check_mechanism(mechanism, samples=3_000)


@pytest.mark.parametrize(
    ("module", "cls", "params"),
    [
        (local_hashing, local_hashing.OptimalLocalHashing, {"k": 4}),
        (hadamard, hadamard.HadamardResponse, {"k": 4}),
        (duchi, duchi.Duchi, {}),
        (graph_features, graph_features.MultiBit, {"dimension": 2, "k": 1}),
        (dbitflip, dbitflip.DBitFlip, {"k": 3, "d": 2}),
        (one_bit_mean, one_bit_mean.OneBitMean, {"intervals": 2}),
        (pem, pem.PrefixExtendingMethod, {"bits": 4, "top": 1, "step": 2}),
        (treehist, treehist.TreeHist, {"bits": 2, "top": 1, "step": 1}),
    ],
)
def test_a_device_path_that_lies_too_rarely_is_caught(
    module: Any, cls: type, params: dict, device_tensors: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The lie (outside) threshold of ε = 3 under a claim of ε = 1: the auditor must refuse it.
    mechanism = _through_tensors(cls)(epsilon=1.0, **params)
    real = dpkit.plugin.lie_threshold
    monkeypatch.setattr(module, "lie_threshold", lambda epsilon, k: real(3.0, k))
    with pytest.raises(DPViolation):
        check_mechanism(mechanism, samples=20_000)
    assert device_tensors  # the device path was the one audited


def test_a_device_path_with_too_little_noise_is_caught(
    device_tensors: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The device's discrete Laplace (laplace's and geometric's noise) at a third of its scale
    # under a claim of ε = 1: refused.
    mechanism = _through_tensors(geometric.Geometric)(epsilon=1.0)
    real = exact.discrete_laplace
    monkeypatch.setattr(
        exact_noise, "discrete_laplace", lambda pairs, rate, n: real(pairs, 3 * rate, n)
    )
    with pytest.raises(DPViolation):
        check_mechanism(mechanism, samples=20_000)
    assert device_tensors  # the device path was the one audited


@pytest.mark.parametrize(
    ("view", "samples", "device_function"),
    [
        (
            _through_tensors(_adjacency.RelationshipView)(
                graph_arr.AsymmetricRandomizedResponse(epsilon=1.0, nodes=3, mu=0.4, pairs="both")
            ),
            10_000,
            "relationship_bits",
        ),
        (
            _through_tensors(graph_triangles.TwoRoundView)(
                graph_triangles.TwoRoundTriangles(epsilon1=0.5, epsilon2=0.5, nodes=4, max_degree=3)
            ),
            2_000,
            "two_round_reports",
        ),
    ],
    ids=["arr-both", "triangles"],
)
def test_graph_views_keep_their_epsilon_on_the_device_in_both_modes(
    view: Any, samples: int, device_function: str, device_tensors: list[str]
) -> None:
    # On edge-neighbouring graphs (the domain's worst-case pairs), statistical tier: graph_arr's
    # view in the "both" form (graph_rr's shares its code), and the two rounds, whose releases
    # take several keystream words each (their noise's digits): fewer samples.
    report = audit(view, samples=samples, alpha=CHECK_ALPHA, seed=3, exact=False, random_pairs=0)
    assert report.verdicts == {"fast": "pass", "secure": "pass"}, report.format_text()
    assert device_function in device_tensors


def test_a_device_triangle_round_with_too_little_noise_is_caught(
    device_tensors: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The round-2 discrete Laplace at a twentieth of its scale under the protocol's claim:
    # refused.
    protocol = graph_triangles.TwoRoundTriangles(epsilon1=0.5, epsilon2=0.5, nodes=4, max_degree=3)
    view = _through_tensors(graph_triangles.TwoRoundView)(protocol)
    real = exact.discrete_laplace
    monkeypatch.setattr(
        graph_views, "discrete_laplace", lambda pairs, rate, n: real(pairs, 20 * rate, n)
    )
    report = audit(view, samples=2_000, alpha=CHECK_ALPHA, seed=4, exact=False, random_pairs=0)
    assert report.verdict == "violation", report.format_text()
    assert "two_round_reports" in device_tensors
