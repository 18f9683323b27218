"""dpkit's two faces: ``dpkit`` for users, ``dpkit.plugin`` for mechanism authors.

The built-in plugins and the example plugin import only from those two modules (plus their own
package and third-party libraries), exactly as a third party must.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import dpkit
import dpkit.plugin

ROOT = Path(__file__).resolve().parents[3]
PLUGIN_FILES = sorted((ROOT / "plugins").rglob("*.py")) + sorted(
    (ROOT / "docs").rglob("dpkit_*.py")
)

USER_FACE = {
    "__version__",
    # mechanisms by name, estimates, the registry
    "mechanism",
    "estimate",
    "accumulate",
    "ParquetReports",
    "graph",
    "get_registry",
    "load_registry",
    "SecureRandom",
    # sessions, budgets, accounting, advice
    "Session",
    "Budget",
    "Ledger",
    "account",
    "calibrate",
    "advise",
    "advise_mean",
    "PureDP",
    "ApproximateDP",
    "LaplaceDP",
    "GaussianDP",
    "SubsampledDP",
    # privacy units
    "IdUnit",
    "RecordUnit",
    "privacy_unit",
    "unit_of",
    # SQL statements as queries
    "sql",
    # the errors a user catches
    "DPKitError",
    "InvalidParameter",
    "InvalidData",
    "BudgetExceeded",
    "SpecError",
    "SqlError",
    "ReleaseFailed",
    "UnitMismatch",
    "UnknownMechanism",
}

PLUGIN_FACE = {
    # registering
    "hookimpl",
    "MechanismInfo",
    # contracts, estimates and statistics
    "Mechanism",
    "Estimator",
    "Statistics",
    "Estimate",
    "FrequencyCounts",
    "MeanEstimate",
    "MeanSums",
    "DistributionEstimate",
    "Document",
    "ReportHistogram",
    "GraphEstimator",
    "GraphEstimate",
    "EdgeCounts",
    "DegreeHistogram",
    "ReportSums",
    # parameters
    "parameter",
    "ParameterDomain",
    "ParameterSpec",
    "Real",
    "Integer",
    "Choice",
    "Boolean",
    "Labels",
    "EPSILON",
    "CENTRAL_EPSILON",
    "DELTA",
    "SENSITIVITY",
    "BOUND",
    # domains
    "Domain",
    "Interval",
    "Box",
    "CategoricalDomain",
    "VectorDomain",
    # privacy events
    "PrivacyEvent",
    "PureDP",
    "ApproximateDP",
    "LaplaceDP",
    "GaussianDP",
    "RandomizedResponseDP",
    "BoundedRangeDP",
    "SubsampledDP",
    "CompositeDP",
    "gaussian_delta",
    "gaussian_meets",
    "share_epsilon",
    "exact",
    # randomness
    "check_rng",
    "resolve_rng",
    "SecureRandom",
    "SecureWordSource",
    "discrete_laplace",
    "discrete_gaussian",
    "bernoulli_exp",
    "bernoulli_bracketed",
    "bernoulli_exp_bracketed",
    "geometric_digits",
    "exp_table",
    "EXP_TABLE_CAP",
    "EXP_TABLE_STEPS",
    "lie_threshold",
    "probability_threshold",
    # arrays
    "as_array",
    "readable",
    "total_floats",
    "lookup_index",
    "plain",
    "describe_dtype",
    # tensors: other libraries' arrays, the device paths
    "ArrayLibrary",
    "StandardUnits",
    "array_library",
    "host_rng",
    "DeviceWords",
    "device_words",
    "uniform_below",
    "flip_bits",
    "flip_graph",
    "kary_response",
    "category_counts",
    "check_categories",
    "unary_reports",
    "unary_counts",
    "unary_log_probability",
    "density_log_probability",
    "device_operands",
    "where_equal",
    "hashed_reports",
    "hashed_log_probability",
    "hashed_support_counts",
    "hadamard_reports",
    "hadamard_log_probability",
    "duchi_reports",
    "multibit_reports",
    "piecewise_reports",
    "hybrid_reports",
    "piecewise_multi_reports",
    "hybrid_multi_reports",
    "square_wave_reports",
    "LatticeLaw",
    "laplace_noise",
    "report_noisy_max_indices",
    "exponential_indices",
    "permute_and_flip_indices",
    "selection_log_operands",
    "geometric_noise",
    "gaussian_noise",
    "dbitflip_reports",
    "dbitflip_counts",
    "dbitflip_log_probability",
    "one_bit_reports",
    "one_bit_counts",
    "sketch_reports",
    "sketch_counts",
    "hadamard_sketch_reports",
    "hadamard_sketch_counts",
    "sketch_log_probability",
    "hadamard_sketch_log_probability",
    "rappor_reports",
    "rappor_log_operands",
    "prefix_reports",
    "prefix_log_probability",
    "tree_reports",
    "tree_log_probability",
    "mean_sums",
    "report_histogram",
    "noisy_list_counts",
    "noisy_list_bits",
    "relationship_bits",
    "reported_adjacency",
    "graph_counts",
    "two_round_graph",
    "coerced_graphs",
    "csr_from_upper",
    "two_round_reports",
    "TwoRoundLaw",
    "duchi_multi_reports",
    # errors
    "DPKitError",
    "InvalidParameter",
    "InvalidData",
    # table statistics
    "RecordUnit",
    "IdUnit",
    "MAX_BOUND",
    "privacy_unit",
    "is_table",
    "json_value",
    "as_frame",
    "implementation",
    "interval",
    "column_kinds",
    "ColumnKind",
    "require_columns",
    "narwhals",
    "Bounding",
    "BoundingKey",
    "bound_contributions",
    "FIRST",
    "per_record",
    "per_partition",
    "positions",
    "number",
    "error_text",
    "text_table",
    "object_text",
}

#: The two modules a plugin may import dpkit's names from.
FACES = {"dpkit": USER_FACE, "dpkit.plugin": PLUGIN_FACE}


def test_the_user_face_is_exactly_the_listed_names() -> None:
    assert sorted(dpkit.__all__) == sorted(USER_FACE)
    assert len(dpkit.__all__) == len(set(dpkit.__all__))


def test_the_plugin_face_is_exactly_the_listed_names() -> None:
    assert sorted(dpkit.plugin.__all__) == sorted(PLUGIN_FACE)
    assert len(dpkit.plugin.__all__) == len(set(dpkit.plugin.__all__))


@pytest.mark.parametrize("module", [dpkit, dpkit.plugin], ids=lambda m: m.__name__)
def test_every_public_name_exists(module: object) -> None:
    missing = [name for name in module.__all__ if not hasattr(module, name)]  # type: ignore[attr-defined]
    assert missing == []


def test_the_lazy_names_are_the_user_face() -> None:
    """Each lazily imported name is public, and every public name but the package's own is lazy."""
    own = {"__version__", "mechanism", "estimate", "graph"}
    assert set(dpkit._LAZY) == USER_FACE - own


def test_there_are_plugin_files_to_check() -> None:
    assert len(PLUGIN_FILES) >= 4
    assert any(path.name == "dpkit_forced_response.py" for path in PLUGIN_FILES)


def foreign_uses(source: str, name: str) -> list[str]:
    """Each use of dpkit in module ``name`` that is not a name of one of the two faces:
    imports of other modules or of names the faces lack, and ``dpkit.X`` attributes they lack,
    each as "module:line: use"."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        where = f"{name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [
                f"{where}: import {alias.name}"
                for alias in node.names
                if alias.name.split(".")[0] == "dpkit" and alias.name not in FACES
            ]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "dpkit":
            face = FACES.get(node.module or "")
            found += [
                f"{where}: from {node.module} import {alias.name}"
                for alias in node.names
                if face is None or alias.name not in face
            ]
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "dpkit"
            and node.attr not in USER_FACE | {"plugin"}
        ):
            found.append(f"{where}: dpkit.{node.attr}")
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and isinstance(node.value.value, ast.Name)
            and (node.value.value.id, node.value.attr) == ("dpkit", "plugin")
            and node.attr not in PLUGIN_FACE
        ):
            found.append(f"{where}: dpkit.plugin.{node.attr}")
    return sorted(found)


@pytest.mark.parametrize("path", PLUGIN_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_plugins_use_only_the_two_faces(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert foreign_uses(source, str(path.relative_to(ROOT))) == []


def test_a_plugin_reaching_past_the_faces_is_named() -> None:
    source = (
        "import dpkit\n"
        "from dpkit.randomness import discrete_laplace\n"
        "from dpkit.plugin import Mechanism, Cost\n"
        "import dpkit.tables\n"
        "x = dpkit.Mechanism, dpkit.plugin.Cost, dpkit.SecureRandom, dpkit.plugin.Mechanism\n"
    )
    assert foreign_uses(source, "dpkit_probe") == [
        "dpkit_probe:2: from dpkit.randomness import discrete_laplace",
        "dpkit_probe:3: from dpkit.plugin import Cost",
        "dpkit_probe:4: import dpkit.tables",
        "dpkit_probe:5: dpkit.Mechanism",
        "dpkit_probe:5: dpkit.plugin.Cost",
    ]


def test_faces_are_importable_modules() -> None:
    for module_name in FACES:
        assert importlib.import_module(module_name).__all__
