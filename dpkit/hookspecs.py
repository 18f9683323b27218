"""The hooks a dpkit plugin implements; these docstrings are the hook reference.

A plugin is a module (or object) registered under the ``dpkit`` entry-point group whose
functions are marked with ``@dpkit.plugin.hookimpl``::

    # pyproject.toml
    [project.entry-points.dpkit]
    coinflip = "dpkit_coinflip"

    # dpkit_coinflip.py
    import dpkit

    @dpkit.plugin.hookimpl
    def dpkit_register_mechanisms(register):
        register(ForcedResponse)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from dpkit.estimator import Estimator
    from dpkit.mechanism import Mechanism

__all__ = ["PROJECT_NAME", "hookimpl", "hookspec"]

PROJECT_NAME = "dpkit"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def dpkit_register_mechanisms(register: Callable[[type[Mechanism]], None]) -> None:
    """Register mechanism classes.

    Called once per plugin when a registry is built. Call ``register(MechanismClass)`` for each
    mechanism; the class's ``name`` is the name users pass to ``dpkit.mechanism(name, ...)``.
    A name registered by two plugins is an error naming both.

    :param register: records one :class:`dpkit.plugin.Mechanism` subclass under its ``name``.
    """


@hookspec
def dpkit_register_queries(register: Callable[[type[Any]], None]) -> None:
    """Register query classes: statistics computed over a dataset (count, sum, mean, ...).

    Called once per plugin when a registry is built. Call ``register(QueryClass)`` for each
    query; the class's ``name`` is the statistic's name in JSON specs. A query class is a
    frozen ``attrs`` class whose parameters are declared with :func:`dpkit.plugin.parameter`, with
    an ``epsilon`` parameter (and ``delta`` where it takes one), a ``privacy`` property (its
    accounting event, known before any data is read) and ``run(data, /, *, rng)``.

    :param register: records one query class under its ``name``.
    """


@hookspec
def dpkit_register_estimators(register: Callable[[str, Callable[[Any], Estimator]], None]) -> None:
    """Register estimators for mechanisms.

    Called once per plugin when a registry is built. Call ``register(mechanism_name, factory)``
    where ``factory(mechanism)`` returns a :class:`dpkit.plugin.Estimator` for that mechanism instance.
    The mechanism may come from another plugin.

    :param register: records the estimator factory for a mechanism name.
    """
