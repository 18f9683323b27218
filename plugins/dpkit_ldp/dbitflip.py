"""dBitFlip (``dbitflip``): histograms from d bits per device, with memoization for repeated
collection.

Ding, Kulkarni & Yekhanin 2017, "Collecting Telemetry Data Privately" (NeurIPS), Section 2.2
(dBitFlip) and Section 3 (memoization).

**Client.** The value is a bucket v ∈ [k]. The device draws d distinct buckets j_1..j_d
uniformly without replacement (once, independently of its value) and reports them with one bit
each: b_p = 1 with probability e^{ε'}/(e^{ε'} + 1) if v = j_p, and 1/(e^{ε'} + 1) otherwise,
ε' = ε/2. Two values change at most two of the bits' laws, each by a factor e^{ε'}: ε-LDP. With
d = 1 only one bit can change, so the bit takes ε' = ε (the paper's ε/2 would leave half of ε
unspent). A report is an array of shape (d, 2) of ``uint64``: (j_p, b_p) per row. d = k is
symmetric unary encoding.

**Estimator.** With φ the realised flip probability and, for bucket v, N_v the reports whose
buckets contain v and B_v the sum of their bits at v,

    ĉ(v) = (k/d)·(B_v − φN_v)/(1 − 2φ)

is unbiased for the count n_v (each device samples v with probability d/k, and
E[(b − φ)/(1 − 2φ)] = 1{x = v}), with the exact variance (derived as in the paper's Theorem 2,
over the bucket draw and the bits)

    Var ĉ(v) = n·(k/d)·A + n_v·(k/d − 1),   A = φ(1 − φ)/(1 − 2φ)²,

linear in n_v: the estimate is a :class:`Estimate` with ``variance_model`` and score
intervals.

**Memoization** (:class:`DBitFlipClient`; the construction follows Section 3's idea of
precomputing the responses). A device's buckets j_1..j_d are fixed for good, and what it reports
depends only on its *key*: which j_p its value equals, or "none". For each key it uses, it draws
the d bits once (independently per key) and reports them every time. A device whose key stays
the same therefore leaks ε over any number of reports; one that uses D distinct keys leaks at
most D·ε ≤ (d + 1)·ε by basic composition, for histories with the same pattern of repeats. A
change of key is visible (the reported bits change), and nothing hides *when* it happened:
memoization protects the values, not the times at which they change.

**Sampling.** The flip is ``word < T`` with T = :func:`lie_threshold` (ε', 2), so the
realised φ ≥ 1/(e^{ε'} + 1) and the realised ε never exceeds ε; the buckets are exactly
uniform (each draw r_p uniform on [k − p], then moved past the buckets already drawn).

On an accelerator's array of bucket indices, ``randomize`` and the estimator's ``accumulate``
run on the device with this law exactly, the flip decided on the same 64-bit threshold
(:mod:`dpkit.tensors.dbitflip`), so either path's reports are estimated by the other. The
client (memoization) is a host object: :meth:`DBitFlipClient.report` refuses an accelerator's
array.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

import dpkit
from dpkit.plugin import (
    EPSILON,
    CategoricalDomain,
    Estimate,
    Estimator,
    Integer,
    InvalidData,
    InvalidParameter,
    Mechanism,
    PureDP,
    Statistics,
    array_library,
    as_array,
    dbitflip_counts,
    dbitflip_log_probability,
    dbitflip_reports,
    describe_dtype,
    device_operands,
    lie_threshold,
    parameter,
    resolve_rng,
)
from dpkit_ldp._arrays import CategoricalInput, as_category_indices
from dpkit_ldp._biased_bits import uniform_words
from dpkit_ldp._memo import MemoizingDevice
from dpkit_ldp._reports import read_only_ints

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["DBitFlip", "DBitFlipClient", "DBitFlipCounts", "DBitFlipEstimator", "draw_buckets"]

_MAX_OUTPUTS = 1 << 16
#: numpy draws a multivariate hypergeometric sample only from fewer than 10⁹ items.
_MAX_SIMULATED = 10**9


def draw_buckets(generator: Any, n: int, k: int, d: int) -> NDArray[np.int64]:
    """n ordered samples of d distinct buckets of [k], each exactly uniform: r_p uniform on
    [k − p], then raised past every bucket already drawn that is ≤ it (in increasing order),
    which maps r_p onto the r_p-th bucket not yet drawn."""
    out = np.empty((n, d), dtype=np.int64)
    for p in range(d):
        r = generator.integers(0, k - p, size=n, dtype=np.int64)
        if p:
            for drawn in np.sort(out[:, :p], axis=1).T:
                r += r >= drawn
        out[:, p] = r
    return out


@attrs.frozen
class DBitFlip(CategoricalInput, Mechanism):
    """dBitFlip over k buckets: d sampled buckets, one randomized bit each (module docstring)."""

    name: ClassVar[str] = "dbitflip"
    kind: ClassVar[Literal["local", "central"]] = "local"
    statistic: ClassVar[str] = "telemetry_frequency"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})

    epsilon: float = parameter(EPSILON, doc="privacy loss ε per report", typical=(0.5, 6.0))
    k: int = parameter(Integer(low=2, high=1 << 24), doc="number of buckets", typical=(2, 6))
    d: int = parameter(
        Integer(low=1, high=1 << 16),
        doc="buckets sampled (bits) per device",
        default=1,
        typical=(1, 2),
    )
    reports: int = parameter(
        Integer(low=1, high=1 << 30),
        doc="memoized reports per device of one value (all identical)",
        default=1,
    )

    def __attrs_post_init__(self) -> None:
        if self.d > self.k:
            raise InvalidParameter("d", self.d, f"at most k={self.k}", owner=self.name)

    @property
    def size(self) -> int:
        return self.k

    @property
    def domain(self) -> CategoricalDomain:
        return CategoricalDomain(self.k)

    @property
    def privacy(self) -> PureDP:
        """ε, for any number of memoized reports of one value."""
        return PureDP(epsilon=self.epsilon)

    @property
    def bit_epsilon(self) -> float:
        """ε' of one bit: ε/2, or ε when d = 1 (module docstring)."""
        return self.epsilon if self.d == 1 else self.epsilon / 2.0

    @property
    def _threshold(self) -> int:
        return lie_threshold(self.bit_epsilon, 2)

    @property
    def flip_probability(self) -> float:
        """The realised φ ≥ 1/(e^{ε'} + 1)."""
        return self._threshold / 2.0**64

    def _bits(self, generator: Any, truth: NDArray[np.bool_]) -> NDArray[np.uint64]:
        flip = uniform_words(generator, truth.size).reshape(truth.shape) < np.uint64(
            self._threshold
        )
        bits: NDArray[np.uint64] = (truth != flip).astype(np.uint64)
        return bits

    def randomize(
        self, values: Any, /, *, rng: np.random.Generator | dpkit.SecureRandom | None = None
    ) -> Any:
        """Reports of shape ``values.shape + (d, 2)`` (rows (j_p, b_p)); with ``reports`` =
        T > 1, T identical memoized reports per value, shape ``values.shape + (T, d, 2)``.

        ``rng``: None (secure mode, the default), a :class:`dpkit.SecureRandom`, or a numpy
        ``Generator`` (fast mode); for torch tensors also a ``torch.Generator``. An
        accelerator's array of bucket indices is randomized there with the same law
        (:mod:`dpkit.tensors.dbitflip`)."""
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            return dbitflip_reports(
                library,
                values,
                k=self.k,
                d=self.d,
                flip_threshold64=self._threshold,
                repeats=self.reports,
                rng=rng,
                owner=self.name,
            )
        generator, _ = resolve_rng(rng, owner=self.name)
        x = as_category_indices(values, self.k, owner=self.name)
        flat = x.reshape(-1).astype(np.int64)
        buckets = draw_buckets(generator, flat.size, self.k, self.d)
        out = np.empty((flat.size, self.d, 2), dtype=np.uint64)
        out[:, :, 0] = buckets
        out[:, :, 1] = self._bits(generator, buckets == flat[:, None])
        if self.reports > 1:
            out = np.repeat(out[:, None], self.reports, axis=1)
            return out.reshape((*x.shape, self.reports, self.d, 2))
        return out.reshape((*x.shape, self.d, 2))

    def client(
        self, *, rng: np.random.Generator | dpkit.SecureRandom | None = None
    ) -> DBitFlipClient:
        """A new device: its d buckets drawn, no bits yet (:class:`DBitFlipClient`)."""
        generator, _ = resolve_rng(rng, owner=self.name)
        return DBitFlipClient(self, draw_buckets(generator, 1, self.k, self.d)[0])

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """log P[report | x] = −ln(k!/(k − d)!) + Σ_p ln P[b_p | 1{x = j_p}] (−inf unless the
        d buckets are distinct and the bits 0/1; T reports must be identical). The sum is
        taken as f·ln φ + (d − f)·ln(1 − φ), f the bits flipped (a one off x's bucket or a
        zero on it).

        An accelerator's array (either operand) is scored on its device, float64, in its type,
        by the same operations (:func:`dpkit.plugin.dbitflip_log_probability`; a numpy or list
        operand beside it is copied there); there the reports must be integers or booleans.
        """
        phi = self.flip_probability
        draws = math.lgamma(self.k + 1) - math.lgamma(self.k - self.d + 1)
        log_terms = (math.log(phi), math.log1p(-phi), draws)
        operands = device_operands(outputs, inputs, owner=self.name)
        if operands is not None:
            return dbitflip_log_probability(
                operands.library,
                operands.outputs,
                operands.inputs,
                k=self.k,
                d=self.d,
                repeats=self.reports,
                log_terms=log_terms,
                owner=self.name,
            )
        out = np.asarray(outputs, dtype=np.uint64)
        if self.reports > 1:
            same = np.all(out == out[..., :1, :, :], axis=(-3, -2, -1))
            out = out[..., 0, :, :]
        else:
            same = np.ones(out.shape[:-2], dtype=bool)
        x = np.asarray(as_category_indices(inputs, self.k, owner=self.name, field="inputs"))
        shape = np.broadcast_shapes(out.shape[:-2], x.shape)
        out = np.broadcast_to(out, (*shape, self.d, 2))
        same = np.broadcast_to(same, shape)
        buckets, bits = out[..., 0], out[..., 1]
        ordered = np.sort(buckets, axis=-1)
        valid = (
            same
            & np.all(buckets < self.k, axis=-1)
            & np.all(bits < 2, axis=-1)
            & np.all(ordered[..., 1:] != ordered[..., :-1], axis=-1)
        )
        hit = buckets == np.broadcast_to(x, shape)[..., None].astype(np.uint64)
        flips = np.sum((bits == 1) != hit, axis=-1, dtype=np.int64)
        log_flip, log_keep, draws = log_terms
        total = (
            flips.astype(np.float64) * log_flip
            + (self.d - flips).astype(np.float64) * log_keep
            - draws
        )
        return np.where(valid, total, -np.inf)

    def output_space(self) -> NDArray[np.uint64]:
        """Every report (every T identical reports), when k!/(k − d)!·2^d ≤ 2¹⁶."""
        count = math.perm(self.k, self.d) << self.d
        if count > _MAX_OUTPUTS:
            raise NotImplementedError(f"{self.name}: k!/(k-d)!·2^d outputs are too many")
        grid = (
            np.array(np.meshgrid(*[np.arange(self.k)] * self.d, indexing="ij"))
            .reshape(self.d, -1)
            .T
        )
        ordered = np.sort(grid, axis=1)
        grid = grid[np.all(ordered[:, 1:] != ordered[:, :-1], axis=1)]
        patterns = (np.arange(1 << self.d)[:, None] >> np.arange(self.d)[None, :]) & 1
        buckets = np.repeat(grid, patterns.shape[0], axis=0)
        bits = np.tile(patterns, (grid.shape[0], 1))
        out = np.stack([buckets, bits], axis=-1).astype(np.uint64)
        if self.reports > 1:
            out = np.repeat(out[:, None], self.reports, axis=1)
        return out

    @classmethod
    def histogram_variance(cls, *, k: int, epsilon: float, n: int = 1, d: int = 1) -> float:
        """Var*[f̂_v] = (k/d)·A/n with A = e^{ε'}/(e^{ε'} − 1)² (the n_v term dropped)."""
        h = math.exp(epsilon if d == 1 else epsilon / 2.0)
        return (k / d) * h / ((h - 1.0) ** 2 * n)

    def simulate(self, counts: Any, /, *, rng: np.random.Generator) -> DBitFlipCounts:
        """The :class:`DBitFlipCounts` of one report from each of ``counts[v]`` devices holding
        bucket v, drawn from exactly the law of real reports, in O(k·d) draws whatever n
        (n < 10⁹; for experiments, never to protect data).

        *Why the law is the same.* (1) A device's d buckets are a uniform d-subset of [k]
        (:func:`draw_buckets`), and so is the subset that *selection sampling* draws: scan
        j = 0..k − 1 and take j with probability r/(k − j), r the buckets still to take
        (Fan, Muller & Rezucha 1962; Knuth, TAOCP vol. 2, §3.4.2, Algorithm S) — each
        d-subset has probability 1/C(k, d). (2) Devices are independent, so at bucket j the
        devices with r still to take that take j are Binomial(count, r/(k − j)), jointly
        over the groups. (3) The subsets do not depend on the values: before bucket j the
        devices holding a value ≥ j are exchangeable given how many of them are in each state
        r, so those holding j are a uniform sample of n_j of them — a multivariate
        hypergeometric draw of their states. (4) Given the subsets the bits are independent:
        B_j = Binomial(own, 1 − φ) + Binomial(N_j − own, φ), own the devices holding j that
        took it. Each step is the conditional law of the next part of the statistic given the
        parts before, so (N, B) has exactly the joint law of the real statistic, with the
        realised φ.
        """
        if not isinstance(rng, np.random.Generator):
            raise InvalidParameter("rng", rng, "a numpy Generator (simulation is fast mode only)")
        true = np.asarray(counts)
        if (
            true.shape != (self.k,)
            or not np.issubdtype(true.dtype, np.integer)
            or (true.size and int(true.min()) < 0)
        ):
            raise InvalidData(
                f"{self.name}: counts must be {self.k} integers >= 0 (devices per bucket), got "
                f"{describe_dtype(true)} of shape {true.shape}",
                field="counts",
            )
        true = true.astype(np.int64)
        if int(true.sum()) >= _MAX_SIMULATED:
            raise InvalidParameter(
                "counts",
                f"{int(true.sum())} devices",
                "fewer than 10^9 devices in all (the range of numpy's exact multivariate "
                "hypergeometric sampler)",
                owner=self.name,
            )
        phi, d = self.flip_probability, self.d
        taking = np.arange(d + 1)  # r, the buckets a device still has to take
        # devices by r: those holding j (row 0), a value > j (row 1), a value < j (row 2)
        state = np.zeros((3, d + 1), dtype=np.int64)
        state[1, d] = int(true.sum())
        flips = np.array([1.0 - phi, phi])
        sampled = np.zeros(self.k, dtype=np.int64)
        ones = np.zeros(self.k, dtype=np.int64)
        for j in range(self.k):
            state[0] = rng.multivariate_hypergeometric(state[1], int(true[j]))
            state[1] -= state[0]
            # r ≤ k − j for every device (it still has k − j buckets to choose from): the
            # states r > k − j are empty, and their chance is capped at 1 only to be a probability
            took = rng.binomial(state, np.minimum(taking / (self.k - j), 1.0))
            own = int(took[0].sum())
            sampled[j] = int(took.sum())
            ones[j] = int(rng.binomial([own, sampled[j] - own], flips).sum())
            state -= took  # r → r − 1 for the devices that took j
            state[:, :-1] += took[:, 1:]
            state[2] += state[0]
        return DBitFlipCounts(self.name, sampled, ones, int(true.sum()))

    def _check_reports(self, reports: Any, owner: str) -> NDArray[np.uint64]:
        array = as_array(reports, owner=owner, field="reports")
        if array.ndim != 3 or array.shape[1:] != (self.d, 2):
            raise InvalidData(
                f"{owner}: reports must have shape (n, {self.d}, 2): (bucket, bit) per sampled "
                f"bucket, one report per device (reports[:, t] of memoized ones); got shape "
                f"{array.shape}",
                field="reports",
            )
        if array.size and not np.issubdtype(array.dtype, np.integer):
            raise InvalidData(
                f"{owner}: reports must be integers, got an array of {describe_dtype(array)}",
                field="reports",
            )
        rows = array.astype(np.uint64, copy=False)
        if rows.size and (int(rows[..., 0].max()) >= self.k or int(rows[..., 1].max()) > 1):
            raise InvalidData(
                f"{owner}: reports hold a bucket outside 0..{self.k - 1} or a bit other than "
                "0/1; were they produced with another k?",
                field="reports",
            )
        return rows


@attrs.frozen(eq=False)
class DBitFlipCounts(Statistics):
    """Per bucket v: ``sampled[v]`` = N_v and ``ones[v]`` = B_v, and n. Adds up."""

    mechanism: str
    sampled: NDArray[np.int64] = attrs.field(converter=read_only_ints)
    ones: NDArray[np.int64] = attrs.field(converter=read_only_ints)
    n: int = attrs.field(converter=int)

    def __add__(self, other: Self) -> Self:
        if type(other) is not type(self):
            return NotImplemented
        if other.mechanism != self.mechanism or other.ones.shape != self.ones.shape:
            raise InvalidData(
                f"cannot merge dBitFlip counts of {other.mechanism!r} over {other.ones.size} "
                f"buckets into counts over {self.ones.size} buckets",
                field="statistics",
            )
        return type(self)(
            self.mechanism,
            self.sampled + other.sampled,
            self.ones + other.ones,
            self.n + other.n,
        )


class DBitFlipEstimator(Estimator):
    """ĉ(v) = (k/d)(B_v − φN_v)/(1 − 2φ), exact variance n(k/d)A + n_v(k/d − 1)."""

    methods: ClassVar[tuple[str, ...]] = ("unbiased",)
    device_methods: ClassVar[frozenset[str]] = frozenset({"accumulate"})
    mechanism: DBitFlip

    def accumulate(self, reports: Any, /) -> DBitFlipCounts:
        """(N_v, B_v) of reports of shape (n, d, 2); an accelerator's are counted there
        (:func:`dpkit.plugin.dbitflip_counts`)."""
        mech = self.mechanism
        library = array_library(reports, owner=f"{mech.name} estimator", field="reports")
        if library is not None:
            sampled, ones, n = dbitflip_counts(
                library, reports, k=mech.k, d=mech.d, owner=f"{mech.name} estimator"
            )
            return DBitFlipCounts(mech.name, sampled, ones, n)
        rows = mech._check_reports(reports, f"{mech.name} estimator")
        buckets = rows[..., 0].reshape(-1).astype(np.intp)
        bits = rows[..., 1].reshape(-1).astype(np.int64)
        sampled = np.bincount(buckets, minlength=mech.k)
        ones = np.bincount(buckets, weights=bits, minlength=mech.k).astype(np.int64)
        return DBitFlipCounts(mech.name, sampled, ones, rows.shape[0])

    def estimate(self, statistics: Any, /, *, method: str = "unbiased") -> Estimate:
        self.check_method(method)
        mech = self.mechanism
        if (
            not isinstance(statistics, DBitFlipCounts)
            or statistics.mechanism != mech.name
            or statistics.ones.shape != (mech.k,)
        ):
            raise InvalidData(
                f"expected the DBitFlipCounts of {mech.name!r} over {mech.k} buckets",
                field="statistics",
            )
        phi, n, ratio = mech.flip_probability, statistics.n, mech.k / mech.d
        counts = ratio * (statistics.ones - phi * statistics.sampled) / (1.0 - 2.0 * phi)
        a = n * ratio * phi * (1.0 - phi) / (1.0 - 2.0 * phi) ** 2
        b = ratio - 1.0
        return Estimate(
            mech.name,
            "unbiased",
            n,
            counts,
            np.maximum(a + b * counts, 0.0),
            variance_model=(a, b),
        )


@attrs.define
class DBitFlipClient(MemoizingDevice):
    """One device's dBitFlip state: its d buckets and, per key it has used (the position p with
    value j_p, or −1 for "none of them"), its memoized bits and how many reports it made.

    It belongs on the device; :meth:`to_dict` / :meth:`from_dict` keep it across restarts.
    """

    mechanism: DBitFlip
    buckets: NDArray[np.int64]
    memo: dict[int, NDArray[np.uint64]] = attrs.field(factory=dict)
    uses: dict[int, int] = attrs.field(factory=dict)

    def key(self, value: Any) -> int:
        """The position p with j_p = value, or −1."""
        x = int(as_category_indices(np.array([value]), self.mechanism.k, owner="dbitflip")[0])
        hits = np.flatnonzero(self.buckets == x)
        return int(hits[0]) if hits.size else -1

    def report(
        self, value: Any, /, *, rng: np.random.Generator | dpkit.SecureRandom | None = None
    ) -> NDArray[np.uint64]:
        """One report (shape (d, 2)): the memoized bits of ``value``'s key (drawn on its first
        use). An accelerator's array is refused: the memo lives on the host."""
        mech = self.mechanism
        self.check_host_value(value)
        generator, _ = resolve_rng(rng, owner=f"{mech.name} client")
        key = self.key(value)
        if key not in self.memo:
            truth = np.arange(mech.d) == key
            self.memo[key] = mech._bits(generator, truth)
        self.uses[key] = self.uses.get(key, 0) + 1
        out = np.empty((mech.d, 2), dtype=np.uint64)
        out[:, 0] = self.buckets
        out[:, 1] = self.memo[key]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism.name,
            "parameters": self.saved_parameters(),
            "buckets": [int(b) for b in self.buckets],
            "keys": [
                {"key": key, "bits": [int(b) for b in bits], "reports": self.uses[key]}
                for key, bits in self.memo.items()
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DBitFlipClient:
        try:
            mechanism = DBitFlip(**data["parameters"])
            buckets = np.array(data["buckets"], dtype=np.int64)
            memo = {int(e["key"]): np.array(e["bits"], dtype=np.uint64) for e in data["keys"]}
            uses = {int(e["key"]): int(e["reports"]) for e in data["keys"]}
        except (KeyError, TypeError, ValueError) as error:
            raise InvalidData(
                f"not a saved dBitFlip client ({type(error).__name__}: {error})", field="state"
            ) from None
        ok = (
            buckets.shape == (mechanism.d,)
            and np.unique(buckets).size == mechanism.d
            and bool(np.all((buckets >= 0) & (buckets < mechanism.k)))
            and all(
                -1 <= key < mechanism.d and b.shape == (mechanism.d,) for key, b in memo.items()
            )
        )
        if not ok:
            raise InvalidData(
                "a saved dBitFlip client that does not fit its mechanism", field="state"
            )
        return cls(mechanism, buckets, memo, uses)
