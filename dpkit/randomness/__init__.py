"""Secure randomness: a ChaCha20 word source, a secure ``Generator`` subset, exact samplers.

dpkit has two randomness modes (:mod:`dpkit.randomness.modes`): **secure**, the default
whenever ``rng`` is None, and **fast**, a seedable ``numpy.random.Generator`` for simulation,
tests and benchmarks (not attack-resistant). See ``docs/security.md`` for the threats and
the costs.

>>> import dpkit.plugin
>>> rng, mode = dpkit.plugin.resolve_rng(None)
>>> mode
'secure'
>>> int(dpkit.plugin.discrete_laplace(2, size=10, rng=rng).size)
10
"""

from __future__ import annotations

from dpkit.randomness.discrete import (
    bernoulli_bracketed,
    bernoulli_exp,
    bernoulli_exp_bracketed,
    discrete_gaussian,
    discrete_laplace,
)
from dpkit.randomness.modes import RandomnessMode, default_secure_random, resolve_rng
from dpkit.randomness.secure_rng import SecureRandom, lie_threshold, probability_threshold
from dpkit.randomness.source import REKEY_BYTES, SecureWordSource

__all__ = [
    "REKEY_BYTES",
    "RandomnessMode",
    "SecureRandom",
    "SecureWordSource",
    "bernoulli_bracketed",
    "bernoulli_exp",
    "bernoulli_exp_bracketed",
    "default_secure_random",
    "discrete_gaussian",
    "discrete_laplace",
    "lie_threshold",
    "probability_threshold",
    "resolve_rng",
]
