"""Hypothesis strategies for auditing mechanisms: parameters, instances and neighbouring inputs.

Parameters come from each mechanism's declaration (:func:`dpkit.params.parameter` with
``typical=(low, high)``): a declared ``typical`` range is drawn from, every other parameter keeps
its default — so a mechanism must be constructible that way. Neighbouring inputs come from the
declared domain (:mod:`dpkit.testing.inputs`), always mixing in the worst-case pairs.

Needs ``hypothesis`` (in the ``test`` extra); importing this module without it fails.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from dpkit.mechanism import Mechanism
from dpkit.params import Integer, Real
from dpkit.testing.inputs import InputPlan, plan_inputs, random_pairs, worst_case_pairs

__all__ = ["mechanisms", "neighbouring_pairs", "parameters"]


def parameters(cls: type[Mechanism]) -> st.SearchStrategy[dict[str, Any]]:
    """Dictionaries of parameter values drawn from the declared ``typical`` ranges."""
    drawn: dict[str, st.SearchStrategy[Any]] = {}
    for name, spec in cls.parameters().items():
        if spec.typical is None:
            continue
        low, high = spec.typical
        if isinstance(spec.domain, Integer):
            drawn[name] = st.integers(int(low), int(high))
        elif isinstance(spec.domain, Real):
            drawn[name] = st.floats(
                float(low),
                float(high),
                allow_nan=False,
                allow_infinity=False,
                allow_subnormal=False,
            )
    return st.fixed_dictionaries(drawn)


def mechanisms(cls: type[Mechanism]) -> st.SearchStrategy[Mechanism]:
    """Instances of ``cls`` at parameters drawn by :func:`parameters`."""
    return parameters(cls).map(lambda params: cls(**params))


def neighbouring_pairs(
    mechanism: Mechanism, plan: InputPlan | None = None
) -> st.SearchStrategy[tuple[Any, Any]]:
    """Pairs of neighbouring inputs of ``mechanism``'s declared relation, worst cases included.

    Random pairs are produced from a Hypothesis-drawn seed, so they replay and shrink like any
    other example.
    """
    plan = plan or plan_inputs(mechanism, rng=np.random.default_rng(0))
    worst = worst_case_pairs(mechanism, plan)
    drawn = st.integers(0, 2**32 - 1).map(
        lambda seed: random_pairs(mechanism, plan, 1, rng=np.random.default_rng(seed))[0]
    )
    return st.one_of(st.sampled_from(worst), drawn)
