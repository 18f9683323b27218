"""The ``graph`` statistic: a graph statistic of an edge list, estimated from its nodes' local
reports, as one query of a JSON spec or a session.

The data are an edge list — one record per edge, two columns of node numbers in 0 .. n − 1 —
so the privacy unit is one edge, and the query is charged what one edge costs under the chosen
protocol (relationship DP, Imola, Murakami & Chaudhuri 2021, Definition 2). The budget ε is
that per-edge cost, and the protocol's own ε follow from it:

* ``graph_rr`` (the "once" form: every edge reported once): ε;
* ``graph_degree``, ``graph_kstar`` (an edge moves both endpoints' counts): ε/2 per node;
* ``graph_triangles`` (two rounds, Imola et al. 2021, Theorem 6): ε₁ = s·ε, ε₂ = ε − ε₁;
* ``graph_one_round`` (noisy lists and degrees): ε₁ = s·ε, ε₂ = (ε − ε₁)/2 (one bit, two
  degrees per edge),

s = ``split``. Everything the parameters decide — the protocol, the statistic its reports
answer, the node count, the degree bound — is checked when the query is built, before any
data is read, each refusal naming its parameter. The edges are read after the spend, and
their processing is total: a record that is not an edge of the n-node graph (a missing or
non-integer end, an end outside 0 .. n − 1, a loop) is dropped, a repeated edge counted once;
no exception depends on them.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

import dpkit
from dpkit.plugin import (
    Choice,
    Integer,
    InvalidData,
    InvalidParameter,
    ParameterDomain,
    PrivacyEvent,
    Real,
    parameter,
    resolve_rng,
)
from dpkit_ldp.graph_one_round import OneRoundGraph
from dpkit_ldp.graph_triangles import TwoRoundTriangles
from dpkit_ldp.graphs import Graph

__all__ = ["GraphQuery"]

#: The statistics a protocol's reports answer (its estimator's ``graph_statistics``).
ANSWERS = {
    "graph_rr": ("edges", "degrees", "triangles"),
    "graph_degree": ("edges", "degrees", "degree_distribution"),
    "graph_kstar": ("kstars",),
    "graph_triangles": ("triangles",),
    "graph_one_round": ("triangles", "kstars"),
}
_NEEDS_BOUND = ("graph_kstar", "graph_triangles")
_ESTIMATES = {
    "edges": dpkit.graph.edge_count,
    "degrees": dpkit.graph.degrees,
    "degree_distribution": dpkit.graph.degree_distribution,
    "triangles": dpkit.graph.triangles,
    "kstars": dpkit.graph.kstars,
}


def _protocol_rule(protocol: str, answers: tuple[str, ...]) -> dict[str, Any]:
    """For a query of ``protocol`` (``graph_rr`` also when none is named): an estimate it
    answers (named, where the default ``edges`` is not one), a degree bound exactly where it
    takes one."""
    named: dict[str, Any] = {
        "properties": {"params": {"properties": {"protocol": {"const": protocol}}}},
        "required": ["params"],
    }
    named["properties"]["params"]["required"] = ["protocol"]
    chosen: dict[str, Any] = named
    if protocol == "graph_rr":  # the default
        unnamed = {"properties": {"params": {"not": {"required": ["protocol"]}}}}
        chosen = {"anyOf": [named, unnamed]}
    params: dict[str, Any] = {"properties": {"estimate": {"enum": list(answers)}}}
    required = ["max_degree"] if protocol in _NEEDS_BOUND else []
    if "edges" not in answers:
        required.append("estimate")
    if required:
        params["required"] = required
    if protocol not in _NEEDS_BOUND:
        params["properties"]["max_degree"] = {
            "not": {},
            "description": f"{protocol} takes no degree bound",
        }
    then: dict[str, Any] = {"properties": {"params": params}}
    if required:
        then["required"] = ["params"]
    return {"if": chosen, "then": then}


@attrs.frozen
class ColumnName(ParameterDomain):
    """A column's name: a string of 1 to 200 characters."""

    def convert(self, value: Any) -> str:
        if not isinstance(value, str) or not 1 <= len(value) <= 200:
            raise ValueError
        return value

    def describe(self) -> str:
        return "a column name (1 to 200 characters)"

    def json_schema(self) -> dict[str, Any]:
        return {"type": "string", "minLength": 1, "maxLength": 200}


@attrs.frozen
class GraphQuery:
    """A graph statistic of an edge list under edge local DP (module docstring)."""

    name: ClassVar[str] = "graph"
    #: What a spec's ``graph`` query must be beyond its parameters' own domains: an edge list
    #: read from a file, one edge a record, no groups; an estimate its protocol answers; a
    #: degree bound exactly for the protocols that take one.
    spec_rule: ClassVar[dict[str, Any]] = {
        "properties": {
            "input": {"properties": {"source": {"enum": ["csv", "parquet"]}}},
            "privacy_unit": {"properties": {"kind": {"const": "record"}}},
            "group_by": {"not": {}, "description": "a graph query cannot be grouped"},
        },
        "allOf": [_protocol_rule(protocol, answers) for protocol, answers in ANSWERS.items()],
    }

    epsilon: float = parameter(
        Real(low=1e-6, high=700.0),
        doc="privacy loss ε per edge (the budget's)",
        typical=(0.5, 4.0),
    )
    nodes: int = parameter(
        Integer(low=2, high=1 << 20), doc="the number n of nodes (public)", typical=(4, 4)
    )
    protocol: str = parameter(
        Choice(tuple(ANSWERS)), doc="the local protocol every node runs", default="graph_rr"
    )
    estimate: str = parameter(
        Choice(("edges", "degrees", "degree_distribution", "triangles", "kstars")),
        doc="the statistic to estimate (one the protocol's reports answer)",
        default="edges",
    )
    target_column: str = parameter(
        ColumnName(),
        doc="the column of each edge's second end (the first is the input column)",
        default="target",
    )
    max_degree: int | None = parameter(
        Integer(low=2, high=1 << 20),
        doc="public degree bound D (graph_kstar, graph_triangles)",
        default=None,
        optional=True,
    )
    split: float = parameter(
        Real(low=0.05, high=0.95),
        doc="the share s of ε for round 1 / the noisy lists (graph_triangles, graph_one_round)",
        default=0.5,
    )
    #: The column of each edge's first end (not a parameter: the spec's input column).
    source_column: str = attrs.field(default="source", kw_only=True)

    def __attrs_post_init__(self) -> None:
        if self.estimate not in ANSWERS[self.protocol]:
            raise InvalidParameter(
                "estimate",
                self.estimate,
                f"one that {self.protocol} answers: " + ", ".join(ANSWERS[self.protocol]),
                owner=self.name,
            )
        if (self.protocol in _NEEDS_BOUND) != (self.max_degree is not None):
            raise InvalidParameter(
                "max_degree",
                self.max_degree,
                "given exactly for " + " and ".join(_NEEDS_BOUND),
                owner=self.name,
            )
        self.mechanism  # noqa: B018 - the protocol's own checks, before any data

    @property
    def mechanism(self) -> Any:
        """The protocol, its ε from the per-edge budget (module docstring)."""
        e, s = self.epsilon, self.split
        if self.protocol == "graph_rr":
            return dpkit.mechanism("graph_rr", epsilon=e, nodes=self.nodes)
        if self.protocol == "graph_degree":
            return dpkit.mechanism("graph_degree", epsilon=e / 2, nodes=self.nodes)
        if self.protocol == "graph_kstar":
            return dpkit.mechanism(
                "graph_kstar", epsilon=e / 2, nodes=self.nodes, max_degree=self.max_degree
            )
        if self.protocol == "graph_triangles":
            assert self.max_degree is not None
            return TwoRoundTriangles(
                epsilon1=s * e, epsilon2=e - s * e, nodes=self.nodes, max_degree=self.max_degree
            )
        return OneRoundGraph(epsilon1=s * e, epsilon2=(e - s * e) / 2, nodes=self.nodes)

    @property
    def privacy(self) -> PrivacyEvent:
        """What one edge costs: the protocol's relationship privacy."""
        event: PrivacyEvent = self.mechanism.relationship_privacy
        return event

    def check_input(self, data: Any, /) -> None:
        """Public phase: a table with the two end columns (its structure only)."""
        names = getattr(data, "column_names", None)
        if names is None or len(names) != 2:
            raise InvalidData(
                f"{self.name}: the data are a table of two columns, the edges' ends",
                field="data",
            )

    def releases(self, data: Any, /) -> int:
        return 1

    def on_column(self, column: str) -> GraphQuery:
        """This query with ``column`` as the edges' first end (a spec's input column)."""
        return attrs.evolve(self, source_column=column)

    def columns_needed(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """Both ends, read as numbers (NaN where missing)."""
        return {self.source_column: ("numbers", ()), self.target_column: ("numbers", ())}

    def edges(self, table: Any) -> NDArray[np.int64]:
        """The edges of the n-node graph among the records (private phase, total)."""
        columns = [
            np.asarray(table.column(i).to_numpy(zero_copy_only=False), dtype=np.float64)
            for i in range(min(2, table.num_columns))
        ]
        if len(columns) < 2:
            return np.zeros((0, 2), dtype=np.int64)
        a, b = columns
        ok = np.isfinite(a) & np.isfinite(b) & (a == np.floor(a)) & (b == np.floor(b))
        ok &= (a >= 0) & (a < self.nodes) & (b >= 0) & (b < self.nodes) & (a != b)
        low = np.minimum(a[ok], b[ok]).astype(np.int64)
        high = np.maximum(a[ok], b[ok]).astype(np.int64)
        pairs = np.unique(high * self.nodes + low)
        return np.stack([pairs // self.nodes, pairs % self.nodes], axis=1)

    def run(self, data: Any, /, *, rng: Any = None) -> Any:
        """Every node's reports on the edge list's graph, then the estimate (post-processing)."""
        generator, _ = resolve_rng(rng, owner=self.name)
        graph = Graph.from_edges(self.edges(data), nodes=self.nodes)
        mechanism = self.mechanism
        reports = mechanism.randomize_graph(graph, rng=generator)
        return _ESTIMATES[self.estimate](mechanism, reports)
