"""The Mechanism contract.

A mechanism is a frozen ``attrs`` class whose fields are its parameters, declared with
:func:`dpkit.params.parameter` so that they are validated at construction. It declares:

``name``
    a stable snake_case name (a released name never changes meaning);
``kind``
    ``"local"`` (each user randomizes their own value) or ``"central"`` (a curator adds noise
    to a query answer);
``domain``
    the input domain with its neighbouring relation (:mod:`dpkit.domains`);
``privacy``
    its cost as an accounting event (:mod:`dpkit.privacy`) with ``epsilon`` and ``delta``;
``randomize(values, /, *, rng)``
    vectorised over numpy arrays of any length: no Python loop per record. The arrays of other
    libraries (torch, JAX, array-api-strict) reach it as zero-copy numpy views and the result
    goes back as the caller's type (:mod:`dpkit.tensors.methods`); arrays on an accelerator
    only if the class names the method in ``device_methods``;
``statistic``
    for a local mechanism, what its estimator estimates from one column of values, as a spec
    ``statistic``: ``"frequency"`` (the default: category counts), ``"mean"`` (a numeric mean);
    other values (``"multivariate_mean"``, ``"distribution"``) are estimated in Python but not
    offered by specs;
``privacy_unit`` (optional)
    who one release protects (:func:`dpkit.units.unit_of`); a mechanism that does not declare
    it protects one record (each value is one report or row), and a session's ledger admits
    only releases under its own unit;
``log_probability(outputs, inputs, /)``
    where tractable, the exact log-pmf (``output_type == "discrete"``) or log-pdf
    (``"continuous"``) of an output given an input, broadcasting; ``output_space()`` lists
    every output of a finite discrete mechanism. The auditor uses these for exact checks.

The privacy boundary (``docs/security.md``). A session releases a mechanism in two phases,
and three hooks, all with safe defaults, let a mechanism take part:

``check_input(values, /)``
    *public phase*, before the spend: refuse an input whose **structure** cannot be used
    (number of dimensions, dtype kind, the length of a trailing candidate axis) with
    :class:`~dpkit.errors.InvalidData`. It must never look at the values themselves.
``releases(values, /)``
    *public phase*: how many releases one call makes, from the input's shape alone (a batch
    of R selections is R releases and is charged R times). 1 by default.
``coerce(values, /, *, rng)``
    *private phase*, after the spend: the per-record transformation that maps every input into
    the declared domain (clamping, replacing an out-of-domain value, NaN handling). It is
    **total**: it never raises and never reports what it changed, so no exception, message or
    exit code can depend on the data. Each record is transformed on its own, so the guarantee
    of ``randomize`` on the domain carries over. ``randomize`` called directly (by the holder
    of the data, outside a session) may still refuse bad values with a typed error.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray

from dpkit.domains import Domain
from dpkit.params import ParameterSpec, parameter_specs
from dpkit.privacy import PrivacyEvent
from dpkit.tensors.methods import wrap_array_methods

__all__ = ["Mechanism"]


class Mechanism:
    """Base class of mechanisms; subclasses are ``@attrs.frozen`` with declared parameters."""

    name: ClassVar[str]
    kind: ClassVar[Literal["local", "central"]]
    output_type: ClassVar[Literal["discrete", "continuous"]] = "discrete"
    statistic: ClassVar[str] = "frequency"
    #: Groups of optional parameters of which at least one must be given (k-ary randomized
    #: response by ``k`` or by ``categories``): the spec schema requires one of each group.
    parameter_alternatives: ClassVar[tuple[tuple[str, ...], ...]] = ()
    #: The array methods (``randomize``, ``randomize_graph``, ``log_probability``) that compute
    #: on an accelerator's arrays themselves; any other refuses such an array with a typed
    #: error (host arrays of every library reach every method: dpkit.tensors.methods).
    device_methods: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        wrap_array_methods(cls)

    @property
    def domain(self) -> Domain:
        raise NotImplementedError

    @property
    def privacy(self) -> PrivacyEvent:
        raise NotImplementedError

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> NDArray[Any]:
        raise NotImplementedError

    def check_input(self, values: NDArray[Any], /) -> None:
        """Public, structural check of a session's input (never of its values); see the module
        docstring. The default accepts any array."""
        return None

    def releases(self, values: NDArray[Any], /) -> int:
        """How many releases one call on ``values`` makes, from their shape alone (default 1)."""
        return 1

    def coerce(self, values: NDArray[Any], /, *, rng: Any) -> NDArray[Any]:
        """Map ``values`` into the declared domain, record by record, without ever raising
        (the session's private phase). The default is the identity."""
        return values

    @property
    def has_exact_distribution(self) -> bool:
        """Whether ``log_probability`` is implemented."""
        return type(self).log_probability is not Mechanism.log_probability

    def log_probability(self, outputs: Any, inputs: Any, /) -> NDArray[np.float64]:
        raise NotImplementedError(f"{self.name} does not declare its output distribution")

    def output_space(self) -> NDArray[Any]:
        """Every possible output of one input, for a finite discrete mechanism."""
        raise NotImplementedError(f"{self.name} has no finite output space")

    @classmethod
    def parameters(cls) -> dict[str, ParameterSpec]:
        """The declared parameters, by name."""
        return parameter_specs(cls)
