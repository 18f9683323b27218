"""dpkit for mechanism authors: everything a plugin imports, and nothing a plugin needs beyond it.

:mod:`dpkit` is the user's face (sessions, mechanisms by name, estimates, accounting); this
module is the author's. The built-in plugins (``dpkit_ldp``, ``dpkit_central``) import only from
these two modules, exactly as a third party must::

    import attrs
    from dpkit.plugin import Mechanism, PureDP, Real, hookimpl, parameter

    @attrs.frozen
    class Coin(Mechanism):
        name = "coin"
        epsilon: float = parameter(Real(low=0.0, high=20.0, low_open=True))
        ...

    @hookimpl
    def dpkit_register_mechanisms(register):
        register(Coin)

**Registering.** :data:`hookimpl` marks a plugin's hook functions (the hooks are
:mod:`dpkit.hookspecs`); :class:`MechanismInfo` is what a registry reports about a registered
mechanism (its plugin and version).

**Contracts.** :class:`Mechanism` (randomize, privacy, input domain) and :class:`Estimator`
(mergeable :class:`Statistics` in, estimates out) are what a plugin implements. The estimates and
statistics an estimator may return: :class:`Estimate` with :class:`FrequencyCounts` (frequency
oracles), :class:`MeanEstimate` with :class:`MeanSums` (mean protocols),
:class:`DistributionEstimate` with :class:`ReportHistogram` (distribution protocols), and for
graph protocols :class:`GraphEstimator`, :class:`GraphEstimate`, :class:`EdgeCounts`,
:class:`DegreeHistogram` and :class:`ReportSums`.

**Parameters.** :func:`parameter` declares a mechanism's field with its domain — :class:`Real`,
:class:`Integer`, :class:`Choice`, :class:`Boolean`, :class:`Labels` (distinct category labels),
or a domain of one's own (a :class:`ParameterDomain` subclass) — from which construction is validated, the JSON Schema and the test ranges are derived
(:class:`ParameterSpec`). The shared domains: :data:`EPSILON` (local ε), :data:`CENTRAL_EPSILON`,
:data:`DELTA`, :data:`SENSITIVITY` and :data:`BOUND` (a clamping bound).

**Domains.** A mechanism's input domain and neighbouring relation, from which the auditor draws
neighbouring inputs: :class:`Domain` and :class:`Interval`, :class:`Box`,
:class:`CategoricalDomain`, :class:`VectorDomain`.

**Privacy events.** A mechanism's ``privacy`` is one of these, so that the accountant composes it
tightly: :class:`PureDP`, :class:`ApproximateDP`, :class:`LaplaceDP`, :class:`GaussianDP`,
:class:`RandomizedResponseDP`, :class:`BoundedRangeDP`, :class:`SubsampledDP`,
:class:`CompositeDP` (all :class:`PrivacyEvent`). :func:`gaussian_delta` and
:func:`gaussian_meets` are the Gaussian's exact (ε, δ) curve; :func:`share_epsilon` splits ε into
parts whose exact sum is at most ε; :func:`exact` reads a number as the
exact rational costs are kept in.

**Randomness.** Every draw takes an explicit ``rng``: :func:`resolve_rng` turns ``None``, a
:class:`SecureRandom` or a fast generator into a generator and its mode, :func:`check_rng`
rejects anything else. Secure mode's exact samplers: :func:`discrete_laplace`,
:func:`discrete_gaussian`, :func:`bernoulli_exp`, :func:`bernoulli_bracketed`,
:func:`bernoulli_exp_bracketed`, :func:`geometric_digits` (from a word reader), over a
:class:`SecureWordSource`; integer thresholds rounded the safe way: :func:`lie_threshold` and
:func:`probability_threshold`.

**Tensors.** A mechanism given a torch, CuPy, JAX or other array-API array returns the same
type on the same device: :func:`array_library` tells such an input from a numpy one
(:class:`ArrayLibrary`: its namespace, device, and a zero-copy way to and from numpy for host
arrays; :func:`host_rng` turns a ``torch.Generator`` into a numpy one; :class:`StandardUnits`
is a numeric mechanism's interval and standard units, as its device path takes them). On an
accelerator,
:func:`device_words` gives a call's uniform 32-bit words there (ChaCha20 in secure mode,
:class:`DeviceWords`), :func:`uniform_below` exactly uniform integers from them;
:func:`flip_bits` / :func:`flip_graph` are randomized response on bits and on an adjacency
(fused into one kernel on CUDA), :func:`kary_response` k-ary randomized response, and
:func:`category_counts` / :func:`check_categories` count and check indices there,
:func:`unary_reports` / :func:`unary_counts` are unary encoding's packed reports and counts,
:func:`hashed_reports` / :func:`hashed_support_counts` optimal local hashing's,
:func:`hadamard_reports` Hadamard response's (counted by :func:`category_counts`), and
:func:`duchi_reports` / :func:`duchi_multi_reports` Duchi et al.'s reports of numbers and
vectors, :func:`multibit_reports` the multi-bit mechanism's rectified node features,
:func:`piecewise_reports`, :func:`hybrid_reports` and :func:`square_wave_reports` the
piecewise, hybrid and square wave mechanisms' reports (secure: the CPU's lattice release,
described by a :class:`LatticeLaw`), :func:`piecewise_multi_reports` /
:func:`hybrid_multi_reports` their vector forms by k sampled attributes,
:func:`laplace_noise`,
:func:`geometric_noise` and :func:`gaussian_noise` the central mechanisms' noise (the host's exact
secure samplers on the device), :func:`report_noisy_max_indices` report-noisy-max's selections
(both modes; secure: the host's exact lattice release) and :func:`exponential_indices` /
:func:`permute_and_flip_indices` the exponential mechanism's and permute-and-flip's (both
modes; secure: the host's exact samplers), :func:`dbitflip_reports` /
:func:`dbitflip_counts` dBitFlip's reports and counts, :func:`one_bit_reports` /
:func:`one_bit_counts` 1BitMean's bits and their count, :func:`sketch_reports` /
:func:`sketch_counts` the count mean sketch's and :func:`hadamard_sketch_reports` /
:func:`hadamard_sketch_counts` the Hadamard count mean sketch's (scored by
:func:`sketch_log_probability` / :func:`hadamard_sketch_log_probability`), :func:`rappor_reports`
RAPPOR's (integer items, hashed as on the host; counted by :func:`sketch_counts`, scored from
:func:`rappor_log_operands`), :func:`prefix_reports` the prefix extending method's and
:func:`tree_reports` TreeHist's (scored by :func:`prefix_log_probability` /
:func:`tree_log_probability`),
:func:`mean_sums` the numeric mechanisms' server statistic, :func:`report_histogram` the
square wave's, :func:`noisy_list_counts` the noisy degrees and k-stars of neighbour lists,
:func:`noisy_list_bits` their bits through ``graph_rr``'s and ``graph_arr``'s channel,
:func:`relationship_bits` and :func:`coerced_graphs` those protocols on whole graphs,
:func:`reported_adjacency` and :func:`graph_counts` their ``randomize_graph`` on one graph,
:func:`two_round_reports` the two-round triangle protocol's, of its :class:`TwoRoundLaw`
(:func:`two_round_graph` its ``randomize_graph`` on one graph);
``log_probability`` there: :func:`density_log_probability` scores a density's one formula on
the device or the host, :func:`device_operands` puts its two operands on one device (or
says the numpy path runs), :func:`where_equal` scores randomized response (and
``DeviceOperands.reals`` reads a density's operands as float64),
:func:`unary_log_probability` scores packed unary reports, :func:`hadamard_log_probability`
Hadamard response's, :func:`hashed_log_probability` local hashing's and
:func:`dbitflip_log_probability` dBitFlip's. A
mechanism or estimator that computes on such arrays names those methods in ``device_methods``;
host arrays of every library reach every mechanism as numpy views (:mod:`dpkit.tensors.methods`).

**Arrays.** Input checks whose messages never carry a private value: :func:`as_array`,
:func:`readable`, :func:`total_floats`, :func:`lookup_index`, :func:`plain` (a numpy scalar as
a Python one) and :func:`describe_dtype` (a dtype in words).

**Result documents.** A result type writes its own JSON result document: :class:`Document`
(the ``to_document`` protocol), :func:`interval` (an interval's document: level, bounds,
method) and :func:`json_value` (arrays and numpy scalars as JSON values, whole); and prints
for people as dpkit's own results do: :func:`number` (a number for reading), :func:`error_text`
(an interval as ``±h``, ``[lower, upper]`` or ``±t ranks``) and :func:`text_table`.

**Errors.** What a mechanism raises, before any private value is read: :class:`InvalidParameter`
(a parameter out of its domain), :class:`InvalidData` (input outside the declared domain), both
:class:`DPKitError`.

**Table statistics.** For statistics over tables (the central plugin's ``TableStatistic``s),
written once against narwhals and run on any engine; they need the ``dpkit[tables]`` extra,
imported only when a table is given. Privacy units: :class:`RecordUnit`, :class:`IdUnit` (an
id with contribution bounds up to :data:`MAX_BOUND`), :func:`privacy_unit`. The public-phase
view of a table: :func:`is_table`, :func:`as_frame`, :func:`implementation`,
:func:`column_kinds` (:data:`ColumnKind`), :func:`require_columns`, :func:`object_text` (an
``object`` column's value as text: the same rows on every engine), and :func:`narwhals` (the
narwhals module, or the missing extra named). Per-id contribution bounding:
:class:`Bounding`, :class:`BoundingKey`, :func:`bound_contributions` and the :data:`FIRST`
column it adds. Running a step on any engine: :func:`per_record`, :func:`per_partition` and
:func:`positions` (category positions as a column).
"""

from __future__ import annotations

from dpkit._rng import check_rng
from dpkit._summary import error_text, number, text_table
from dpkit.accounting import exact
from dpkit.arrays import as_array, describe_dtype, lookup_index, plain, readable, total_floats
from dpkit.distribution_estimate import DistributionEstimate, ReportHistogram
from dpkit.document import Document, interval, json_value
from dpkit.domains import Box, CategoricalDomain, Domain, Interval, VectorDomain
from dpkit.errors import DPKitError, InvalidData, InvalidParameter
from dpkit.estimator import Estimate, Estimator, FrequencyCounts, Statistics
from dpkit.graph import DegreeHistogram, EdgeCounts, GraphEstimate, GraphEstimator, ReportSums
from dpkit.hookspecs import hookimpl
from dpkit.mean_estimate import MeanEstimate, MeanSums
from dpkit.mechanism import Mechanism
from dpkit.params import (
    BOUND,
    CENTRAL_EPSILON,
    DELTA,
    EPSILON,
    SENSITIVITY,
    Boolean,
    Choice,
    Integer,
    Labels,
    ParameterDomain,
    ParameterSpec,
    Real,
    parameter,
)
from dpkit.privacy import (
    ApproximateDP,
    BoundedRangeDP,
    CompositeDP,
    GaussianDP,
    LaplaceDP,
    PrivacyEvent,
    PureDP,
    RandomizedResponseDP,
    SubsampledDP,
    gaussian_delta,
    gaussian_meets,
    share_epsilon,
)
from dpkit.randomness import (
    SecureRandom,
    SecureWordSource,
    bernoulli_bracketed,
    bernoulli_exp,
    bernoulli_exp_bracketed,
    discrete_gaussian,
    discrete_laplace,
    lie_threshold,
    probability_threshold,
    resolve_rng,
)
from dpkit.randomness.exp_table import EXP_TABLE_CAP, EXP_TABLE_STEPS, exp_table
from dpkit.randomness.geometric import geometric_digits
from dpkit.registry import MechanismInfo
from dpkit.tables import (
    FIRST,
    Bounding,
    BoundingKey,
    ColumnKind,
    as_frame,
    bound_contributions,
    column_kinds,
    implementation,
    is_table,
    narwhals,
    per_partition,
    per_record,
    positions,
    require_columns,
)
from dpkit.tables.text import object_text
from dpkit.tensors.bits import csr_from_upper, flip_bits, flip_graph
from dpkit.tensors.categories import category_counts, check_categories, kary_response
from dpkit.tensors.dbitflip import dbitflip_counts, dbitflip_log_probability, dbitflip_reports
from dpkit.tensors.device_random import DeviceWords, device_words, host_rng, uniform_below
from dpkit.tensors.duchi import duchi_reports
from dpkit.tensors.duchi_multi import duchi_multi_reports
from dpkit.tensors.graph_views import (
    TwoRoundLaw,
    coerced_graphs,
    graph_counts,
    relationship_bits,
    reported_adjacency,
    two_round_graph,
    two_round_reports,
)
from dpkit.tensors.hadamard import hadamard_log_probability, hadamard_reports
from dpkit.tensors.hashing import (
    hashed_log_probability,
    hashed_reports,
    hashed_support_counts,
)
from dpkit.tensors.lattice import LatticeLaw
from dpkit.tensors.libraries import ArrayLibrary, StandardUnits, array_library
from dpkit.tensors.list_bits import noisy_list_bits
from dpkit.tensors.list_counts import noisy_list_counts
from dpkit.tensors.log_probability import (
    density_log_probability,
    device_operands,
    where_equal,
)
from dpkit.tensors.mean_sums import mean_sums
from dpkit.tensors.multibit import multibit_reports
from dpkit.tensors.noise import gaussian_noise, geometric_noise, laplace_noise
from dpkit.tensors.one_bit_mean import one_bit_counts, one_bit_reports
from dpkit.tensors.piecewise import hybrid_reports, piecewise_reports
from dpkit.tensors.prefix_tree import tree_log_probability, tree_reports
from dpkit.tensors.prefixes import prefix_log_probability, prefix_reports
from dpkit.tensors.rappor import rappor_log_operands, rappor_reports
from dpkit.tensors.report_histogram import report_histogram
from dpkit.tensors.sampled import hybrid_multi_reports, piecewise_multi_reports
from dpkit.tensors.selection import (
    exponential_indices,
    permute_and_flip_indices,
    report_noisy_max_indices,
    selection_log_operands,
)
from dpkit.tensors.sketch import (
    hadamard_sketch_counts,
    hadamard_sketch_log_probability,
    hadamard_sketch_reports,
    sketch_counts,
    sketch_log_probability,
    sketch_reports,
)
from dpkit.tensors.square_wave import square_wave_reports
from dpkit.tensors.unary import unary_counts, unary_log_probability, unary_reports
from dpkit.units import MAX_BOUND, IdUnit, RecordUnit, privacy_unit

__all__ = [
    "BOUND",
    "CENTRAL_EPSILON",
    "DELTA",
    "EPSILON",
    "EXP_TABLE_CAP",
    "EXP_TABLE_STEPS",
    "FIRST",
    "MAX_BOUND",
    "SENSITIVITY",
    "ApproximateDP",
    "ArrayLibrary",
    "Boolean",
    "BoundedRangeDP",
    "Bounding",
    "BoundingKey",
    "Box",
    "CategoricalDomain",
    "Choice",
    "ColumnKind",
    "CompositeDP",
    "DPKitError",
    "DegreeHistogram",
    "DeviceWords",
    "DistributionEstimate",
    "Document",
    "Domain",
    "EdgeCounts",
    "Estimate",
    "Estimator",
    "FrequencyCounts",
    "GaussianDP",
    "GraphEstimate",
    "GraphEstimator",
    "IdUnit",
    "Integer",
    "Interval",
    "InvalidData",
    "InvalidParameter",
    "Labels",
    "LaplaceDP",
    "LatticeLaw",
    "MeanEstimate",
    "MeanSums",
    "Mechanism",
    "MechanismInfo",
    "ParameterDomain",
    "ParameterSpec",
    "PrivacyEvent",
    "PureDP",
    "RandomizedResponseDP",
    "Real",
    "RecordUnit",
    "ReportHistogram",
    "ReportSums",
    "SecureRandom",
    "SecureWordSource",
    "StandardUnits",
    "Statistics",
    "SubsampledDP",
    "TwoRoundLaw",
    "VectorDomain",
    "array_library",
    "as_array",
    "as_frame",
    "bernoulli_bracketed",
    "bernoulli_exp",
    "bernoulli_exp_bracketed",
    "bound_contributions",
    "category_counts",
    "check_categories",
    "check_rng",
    "coerced_graphs",
    "column_kinds",
    "csr_from_upper",
    "dbitflip_counts",
    "dbitflip_log_probability",
    "dbitflip_reports",
    "density_log_probability",
    "describe_dtype",
    "device_operands",
    "device_words",
    "discrete_gaussian",
    "discrete_laplace",
    "duchi_multi_reports",
    "duchi_reports",
    "error_text",
    "exact",
    "exp_table",
    "exponential_indices",
    "flip_bits",
    "flip_graph",
    "gaussian_delta",
    "gaussian_meets",
    "gaussian_noise",
    "geometric_digits",
    "geometric_noise",
    "graph_counts",
    "hadamard_log_probability",
    "hadamard_reports",
    "hadamard_sketch_counts",
    "hadamard_sketch_log_probability",
    "hadamard_sketch_reports",
    "hashed_log_probability",
    "hashed_reports",
    "hashed_support_counts",
    "hookimpl",
    "host_rng",
    "hybrid_multi_reports",
    "hybrid_reports",
    "implementation",
    "interval",
    "is_table",
    "json_value",
    "kary_response",
    "laplace_noise",
    "lie_threshold",
    "lookup_index",
    "mean_sums",
    "multibit_reports",
    "narwhals",
    "noisy_list_bits",
    "noisy_list_counts",
    "number",
    "object_text",
    "one_bit_counts",
    "one_bit_reports",
    "parameter",
    "per_partition",
    "per_record",
    "permute_and_flip_indices",
    "piecewise_multi_reports",
    "piecewise_reports",
    "plain",
    "positions",
    "prefix_log_probability",
    "prefix_reports",
    "privacy_unit",
    "probability_threshold",
    "rappor_log_operands",
    "rappor_reports",
    "readable",
    "relationship_bits",
    "report_histogram",
    "report_noisy_max_indices",
    "reported_adjacency",
    "require_columns",
    "resolve_rng",
    "selection_log_operands",
    "share_epsilon",
    "sketch_counts",
    "sketch_log_probability",
    "sketch_reports",
    "square_wave_reports",
    "text_table",
    "total_floats",
    "tree_log_probability",
    "tree_reports",
    "two_round_graph",
    "two_round_reports",
    "unary_counts",
    "unary_log_probability",
    "unary_reports",
    "uniform_below",
    "where_equal",
]
