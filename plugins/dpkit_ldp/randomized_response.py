"""Binary randomized response (``rr``) and its estimator."""

from __future__ import annotations

import decimal
import math
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    EPSILON,
    ArrayLibrary,
    CategoricalDomain,
    Estimate,
    Estimator,
    FrequencyCounts,
    InvalidData,
    InvalidParameter,
    Mechanism,
    RandomizedResponseDP,
    Real,
    SecureRandom,
    array_library,
    category_counts,
    csr_from_upper,
    device_operands,
    flip_bits,
    flip_graph,
    lie_threshold,
    parameter,
    probability_threshold,
    resolve_rng,
    where_equal,
)
from dpkit_ldp import _frequency
from dpkit_ldp._arrays import CategoricalInput, as_binary

__all__ = ["RandomizedResponse", "RandomizedResponseEstimator"]

_CHUNK = 1 << 16  # values per chunk: keeps the temporaries in cache
_GRAPH_OUTPUTS = ("dense", "packed", "coo", "csr")
GraphOutput = Literal["dense", "packed", "coo", "csr"]  # randomize_graph's layouts


@attrs.frozen
class RandomizedResponse(CategoricalInput, Mechanism):
    """Binary randomized response: keep each bit with probability p, flip it with 1 − p.

    Warner 1965, "Randomized Response: A Survey Technique for Eliminating Evasive Answer Bias"
    (JASA 60(309)); as an ε-LDP mechanism, Dwork & Roth 2014, "The Algorithmic Foundations of
    Differential Privacy", Section 3.2 and Claim 3.5; Wang et al. 2017 (USENIX Security),
    Section 4.1 (the k = 2 case of direct encoding):

        P[y = x] = p = e^ε / (1 + e^ε),      P[y = 1 − x] = 1 − p = 1 / (1 + e^ε),

    so P[y | x] / P[y | x'] ≤ p / (1 − p) = e^ε. Give either ``epsilon`` or the keep probability
    ``keep`` ∈ (1/2, 1), with ε = ln(keep / (1 − keep)); Warner's two-coin survey (answer truthfully
    on heads, else toss again and answer "yes" on heads) is ``keep = 3/4``, ε = ln 3.

    Each element of an array of any shape is one protected bit. :meth:`randomize_graph` perturbs
    the adjacency matrix of a graph (edge-LDP), each unordered pair once for undirected graphs.

    Randomness: ``rng=None`` (the default) is secure mode, a ChaCha20 keystream
    (:class:`dpkit.SecureRandom`); a ``numpy.random.Generator`` is fast mode (seedable, for
    simulation and tests; not attack-resistant). In fast mode the flip is drawn as ``u < 1 − p``
    with u uniform on the 2⁻⁵³ grid, which rounds the float 1 − p up to that grid. In secure
    mode it is ``w < T`` with w a uniform 64-bit word and T = :func:`dpkit.plugin.lie_threshold` (ε, 2):
    the exact 1/(1 + e^ε), evaluated in high precision, rounded up to the 2⁻⁶⁴ grid, so the
    realised flip probability is never below the true one and, as 1 − p < 1/2, the realised
    ε = ln(p′/(1 − p′)) never exceeds the declared ε.
    """

    name: ClassVar[str] = "rr"
    kind: ClassVar[Literal["local", "central"]] = "local"
    device_methods: ClassVar[frozenset[str]] = frozenset(
        {"randomize", "randomize_graph", "log_probability"}
    )

    epsilon: float | None = parameter(
        EPSILON,
        doc="privacy loss ε of each bit (give this or keep)",
        default=None,
        optional=True,
        typical=(0.05, 6.0),
    )
    keep: float | None = parameter(
        Real(low=0.5, high=1.0, low_open=True, high_open=True),
        doc="probability of reporting the true bit (give this or epsilon)",
        default=None,
        optional=True,
    )

    def __attrs_post_init__(self) -> None:
        if (self.epsilon is None) == (self.keep is None):
            raise InvalidParameter(
                "epsilon", self.epsilon, "given, or else keep, but not both", owner=self.name
            )
        if self.keep is not None:
            object.__setattr__(self, "epsilon", _log_odds_up(self.keep))

    @property
    def eps(self) -> float:
        assert self.epsilon is not None  # set in __attrs_post_init__
        return self.epsilon

    @property
    def flip_probability(self) -> float:
        """1 − p = 1 / (1 + e^ε), computed without overflow."""
        if self.keep is not None:
            return 1.0 - self.keep
        t = math.exp(-self.eps)
        return t / (1.0 + t)

    @property
    def keep_probability(self) -> float:
        """p = e^ε / (1 + e^ε)."""
        return self.keep if self.keep is not None else 1.0 / (1.0 + math.exp(-self.eps))

    @property
    def domain(self) -> CategoricalDomain:
        return CategoricalDomain(2)

    @property
    def privacy(self) -> RandomizedResponseDP:
        return RandomizedResponseDP(epsilon=self.eps, k=2)

    def randomize(
        self, values: Any, /, *, rng: np.random.Generator | SecureRandom | None = None
    ) -> Any:
        """Perturb every element of ``values`` (0/1 of any shape and dtype) independently.

        ``rng``: None (secure mode, the default), a :class:`dpkit.SecureRandom`, or a numpy
        ``Generator`` (fast mode); for torch tensors also a ``torch.Generator`` (fast mode).
        A numpy array, list or scalar gives a numpy array; a torch, CuPy, JAX or other
        array-API array gives the same type, dtype and device (:mod:`dpkit.tensors`).
        """
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            return flip_bits(
                library, values, threshold64=self._flip_threshold(), rng=rng, owner=self.name
            )
        generator, _ = resolve_rng(rng, owner=self.name)
        bits = as_binary(values, owner=self.name)
        flat = bits.reshape(-1)
        noisy = np.empty_like(flat)
        flip_probability = self.flip_probability
        threshold = self._flip_threshold()
        for start in range(0, flat.size, _CHUNK):  # cache-sized chunks: less memory traffic
            chunk = flat[start : start + _CHUNK]
            if isinstance(generator, SecureRandom):
                flip = generator.bernoulli_threshold(threshold, chunk.size)
            else:
                flip = generator.random(chunk.size) < flip_probability
            if np.issubdtype(chunk.dtype, np.floating):
                noisy[start : start + _CHUNK] = np.where(flip, 1.0 - chunk, chunk)
            else:
                np.not_equal(chunk, flip, out=noisy[start : start + _CHUNK], casting="unsafe")
        return noisy.reshape(bits.shape)

    def _flip_threshold(self) -> int:
        """T with T/2⁶⁴ the flip probability rounded up (never below 1 − p)."""
        if self.keep is None:
            return lie_threshold(self.eps, 2)
        return probability_threshold(1.0 - self.keep, rounding="up")  # 1 − keep is exact

    def randomize_graph(
        self,
        adjacency: Any,
        /,
        *,
        rng: np.random.Generator | SecureRandom | None = None,
        undirected: bool = True,
        output: GraphOutput = "dense",
    ) -> Any:
        """Perturb an n×n 0/1 adjacency matrix, with ε-edge-LDP per pair (no self-loops).

        With ``undirected=True`` the matrix must be symmetric; each unordered pair {i, j} is
        perturbed once (upper triangle) and mirrored, so the output is symmetric and every edge
        is protected at level ε (perturbing both (i, j) and (j, i) independently would release
        the edge twice, at 2ε). The diagonal of the output is 0.

        ``output`` is the layout of the noisy graph, for graphs whose n×n matrix would not fit:

        * ``"dense"`` (the default): the n×n matrix, in the adjacency's dtype;
        * ``"packed"``: uint8 of shape (n, ⌈n/8⌉), ``numpy.packbits(dense, axis=1)`` (eight
          entries a byte, the first the high bit, the row's last byte padded with 0 bits):
          n²/8 bytes, ``numpy.unpackbits(packed, axis=1, count=n)`` gives the dense matrix;
        * ``"coo"``: the upper triangle's ones as two int64 arrays ``(rows, cols)``, i < j,
          row-major — each undirected edge once (the symmetric matrix also has (j, i)); 16
          bytes a reported edge;
        * ``"csr"``: the whole symmetric matrix in compressed sparse rows, two int64 arrays
          ``(indptr, indices)`` (n + 1 row starts; each row's columns ascending), each edge
          as (i, j) and (j, i): 16 bytes a reported edge, the layout of
          ``scipy.sparse.csr_matrix`` and ``torch.sparse_csr_tensor``.

        The adjacency itself is always a dense 0/1 (or bool) matrix: a packed one is not
        accepted. ``packed``, ``coo`` and ``csr`` are for undirected graphs only. With the same
        ``rng`` (the same key, or seed) the four layouts describe the same noisy graph.

        A tensor on an accelerator stays there: only the n(n − 1)/2 pairs i < j are drawn (one
        ChaCha20 word each in secure mode) and mirrored (:mod:`dpkit.tensors.bits`); the packed
        and sparse layouts are built a band of rows at a time, so the device holds the result
        and one band, never the n×n matrix. A host array is perturbed dense and then packed or
        listed.
        """
        if not isinstance(output, str) or output not in _GRAPH_OUTPUTS:
            raise InvalidParameter(
                "output", output, "one of 'dense', 'packed', 'coo', 'csr'", owner=self.name
            )
        if output != "dense" and not undirected:
            raise InvalidParameter(
                "output",
                output,
                "'dense' for a directed graph (undirected=False): 'packed', 'coo' and "
                "'csr' hold undirected graphs",
                owner=self.name,
            )
        library = array_library(adjacency, owner=self.name, field="adjacency")
        if library is not None:  # an accelerator's array
            return self._randomize_device_graph(
                library, adjacency, rng=rng, undirected=undirected, output=output
            )
        matrix = as_binary(adjacency, owner=self.name, field="adjacency")
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
            raise InvalidData(
                f"{self.name}: adjacency must be a square matrix, got shape {matrix.shape}",
                field="adjacency",
            )
        if undirected and not np.array_equal(matrix, matrix.T):
            raise InvalidData(
                f"{self.name}: adjacency is not symmetric, so it is not an undirected graph; "
                "pass undirected=False for a directed graph",
                field="adjacency",
            )
        noisy = self.randomize(matrix, rng=rng)
        if undirected:
            upper = np.triu(noisy, 1)
            noisy = upper + upper.T if noisy.dtype != np.bool_ else upper | upper.T
        np.fill_diagonal(noisy, 0)
        if output == "packed":
            return np.packbits(noisy != 0, axis=1)
        if output in ("coo", "csr"):
            rows, cols = (a.astype(np.int64) for a in np.nonzero(np.triu(noisy, 1)))
            if output == "csr":
                return csr_from_upper(np, rows, cols, int(matrix.shape[0]))
            return rows, cols
        return noisy

    def _randomize_device_graph(
        self,
        library: ArrayLibrary,
        adjacency: Any,
        *,
        rng: Any,
        undirected: bool,
        output: GraphOutput,
    ) -> Any:
        xp = library.xp
        shape = tuple(adjacency.shape)
        if len(shape) != 2 or shape[0] != shape[1]:
            raise InvalidData(
                f"{self.name}: adjacency must be a square matrix, got shape {shape}",
                field="adjacency",
            )
        if not undirected:
            noisy = flip_bits(
                library, adjacency, threshold64=self._flip_threshold(), rng=rng, owner=self.name
            )
            eye = xp.eye(shape[0], dtype=xp.bool, device=library.device)
            return xp.where(eye, xp.zeros_like(noisy), noisy)
        return flip_graph(
            library,
            adjacency,
            threshold64=self._flip_threshold(),
            rng=rng,
            owner=self.name,
            field="adjacency",
            output=output,
        )

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """log P[y | x]: log p where y = x, log(1 − p) elsewhere (broadcasting).

        An accelerator's array (either operand) is scored on its device, float64, in its type
        (:mod:`dpkit.tensors.log_probability`: a numpy or list operand beside it is copied
        there); y and x are compared as numpy compares them, so an output outside {0, 1}
        scores log(1 − p) on both paths.
        """
        log_keep = -math.log1p(math.exp(-self.eps))
        log_flip = -self.eps - math.log1p(math.exp(-self.eps))
        operands = device_operands(outputs, inputs, owner=self.name)
        if operands is not None:
            return where_equal(operands, equal=log_keep, other=log_flip)
        same = np.asarray(outputs) == np.asarray(inputs)
        return np.where(same, log_keep, log_flip)

    def output_space(self) -> NDArray[np.int64]:
        return np.arange(2, dtype=np.int64)


def _log_odds_up(keep: float) -> float:
    """The ε that ``keep`` realises, ln(keep/(1 − keep)), rounded up to a double.

    The sampler flips with probability exactly 1 − keep (a double, exact by Sterbenz's lemma),
    so the declared ε must not fall below the exact log-odds; ``log(keep) − log1p(−keep)`` in
    floating point fell below it for about half of all keep values, by up to a relative
    7·10⁻¹² near keep = 1/2 (cancellation). Evaluated in 60-digit decimal arithmetic from the
    double's exact value, the margin (≫ its ~10⁻⁵⁹ error) on the upper side. Both readings of
    the double returned are at least that bound: its exact value and its shortest decimal, which
    is what the ledger charges (:func:`dpkit.plugin.exact`) and can lie half an ulp below.
    """
    context = decimal.Context(prec=60)
    odds = context.divide(decimal.Decimal(keep), decimal.Decimal(1.0 - keep))
    log_odds = context.ln(odds)
    bound = context.add(log_odds, context.multiply(log_odds, decimal.Decimal("1e-45")))
    value = float(bound)
    while decimal.Decimal(value) < bound or decimal.Decimal(repr(value)) < bound:
        value = math.nextafter(value, math.inf)
    return value


class RandomizedResponseEstimator(Estimator):
    """Debiased count of ones (and of zeros) from rr reports.

    With s ones among N reports, the unbiased estimate of the number of true ones is
    (s − N(1 − p)) / (2p − 1), with variance N p(1 − p) / (2p − 1)² whatever the truth
    (Warner 1965; the k = 2 case of Wang et al. 2017, Theorem 2). ``method="mle"`` is the
    maximum-likelihood estimate, which for binary RR is the unbiased one clipped to [0, N]
    (biased near the boundary; its reported variance and interval are the unbiased estimator's,
    the interval clipped to [0, N]: see :class:`dpkit.plugin.Estimate`).

    ``estimates`` has two entries: the estimated counts of 0s and of 1s.
    """

    device_methods: ClassVar[frozenset[str]] = frozenset({"accumulate"})

    methods: ClassVar[tuple[str, ...]] = ("unbiased", "mle")
    mechanism: RandomizedResponse

    def accumulate(self, reports: Any, /) -> FrequencyCounts:
        library = array_library(reports, owner=self.mechanism.name, field="reports")
        if library is not None:  # counted on the accelerator
            counts = category_counts(library, reports, 2, owner=self.mechanism.name)
            return FrequencyCounts(self.mechanism.name, counts, int(counts.sum()))
        bits = as_binary(reports, owner=f"{self.mechanism.name} estimator", field="reports")
        ones = int(np.count_nonzero(bits))
        return FrequencyCounts(self.mechanism.name, [bits.size - ones, ones], bits.size)

    def estimate(self, statistics: FrequencyCounts, /, *, method: str = "unbiased") -> Estimate:
        self.check_method(method)
        self.check_statistics(statistics, 2)
        n = statistics.n
        p, q = self.mechanism.keep_probability, self.mechanism.flip_probability
        counts = _frequency.debiased_counts(statistics.counts, n, p, q)
        processed = np.clip(counts, 0.0, float(n)) if method == "mle" else counts
        variance = np.full(2, n * p * q / (p - q) ** 2)
        return Estimate(
            self.mechanism.name,
            method,
            n,
            processed,
            variance,
            categories=(0, 1),
            unbiased_estimates=None if method == "unbiased" else counts,
            support_probabilities=(p, q),
        )
