"""The mean advisor: dpkit.advise_mean and `dpkit advise --mean` (issue 18).

The worst-case variances are recomputed here from Wang et al. 2019's closed forms (Section III:
Duchi et al.'s ((e^ε + 1)/(e^ε − 1))², PM's 4e^{ε/2}/(3(e^{ε/2} − 1)²), HM's constant above ε*)
and the multidimensional forms (Section IV, with B_d checked by enumeration in
test_ldp_numeric_privacy.py), independently of the mechanisms' code.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
import pytest
from dpkit_ldp.hybrid import EPSILON_STAR

import dpkit
from dpkit.cli import main


def _duchi(epsilon: float) -> float:
    return ((math.exp(epsilon) + 1) / (math.exp(epsilon) - 1)) ** 2


def _pm(epsilon: float, t2: float = 1.0) -> float:
    z = math.exp(epsilon / 2)
    return t2 / (z - 1) + (z + 3) / (3 * (z - 1) ** 2)


def _hm(epsilon: float) -> float:
    if epsilon <= EPSILON_STAR:
        return _duchi(epsilon)
    z = math.exp(epsilon / 2)
    return (z + 3) / (3 * z * (z - 1)) + (math.exp(epsilon) + 1) ** 2 / (
        z * (math.exp(epsilon) - 1) ** 2
    )


def _sampled(one: Callable[[float, float], float], epsilon: float, d: int) -> float:
    """max over t² ∈ {0, 1} of (d/k)(Var_1(t; ε/k) + t²) − t², k = max(1, min(d, ⌊ε/2.5⌋))."""
    k = max(1, min(d, math.floor(epsilon / 2.5)))
    return max(d / k * (one(epsilon / k, t2) + t2) - t2 for t2 in (0.0, 1.0))


def _hm_at(epsilon: float, t2: float) -> float:
    alpha = 1 - math.exp(-epsilon / 2) if epsilon > EPSILON_STAR else 0.0
    return alpha * _pm(epsilon, t2) + (1 - alpha) * (_duchi(epsilon) - t2)


def _duchi_multi(epsilon: float, d: int) -> float:
    on_plane = math.comb(d, d // 2) if d % 2 == 0 else 0
    sides = (2**d - on_plane) // 2
    e = math.exp(epsilon)
    return ((sides * (e + 1) + on_plane) / ((e - 1) * math.comb(d - 1, (d - 1) // 2))) ** 2


@pytest.mark.parametrize("epsilon", [0.1, 0.5, EPSILON_STAR, 0.7, 1.0, 2.0, 4.0, 8.0])
def test_scalar_ranking_matches_wang_et_al(epsilon: float) -> None:
    advice = dpkit.advise_mean(epsilon, lower=18, upper=90, n=500)
    scale = 36.0**2 / 500
    assert advice.variances["duchi"] == pytest.approx(_duchi(epsilon) * scale, rel=1e-12)
    assert advice.variances["pm"] == pytest.approx(_pm(epsilon) * scale, rel=1e-12)
    assert advice.variances["hm"] == pytest.approx(_hm(epsilon) * scale, rel=1e-9)
    assert list(advice.variances) == sorted(
        advice.variances, key=lambda n: (advice.variances[n], n)
    )
    # Wang et al.: HM is never worse than PM or Duchi's; at ε ≤ ε* it is Duchi's mechanism.
    assert advice.best == ("duchi" if epsilon <= EPSILON_STAR else "hm")
    assert advice.best in advice.why and "worst-case variance" in advice.why
    assert set(advice.skipped) == {"duchi_multi", "pm_multi", "hm_multi", "multibit"}
    assert "use duchi" in advice.skipped["multibit"]
    assert "for one value use" in advice.skipped["pm_multi"]


@pytest.mark.parametrize("d", [2, 3, 8, 9])
@pytest.mark.parametrize("epsilon", [0.5, 2.0, 8.0])
def test_vector_ranking(d: int, epsilon: float) -> None:
    advice = dpkit.advise_mean(epsilon, dimension=d)
    assert advice.variances["duchi_multi"] == pytest.approx(_duchi_multi(epsilon, d), rel=1e-12)
    assert advice.variances["pm_multi"] == pytest.approx(_sampled(_pm, epsilon, d), rel=1e-12)
    assert advice.variances["hm_multi"] == pytest.approx(_sampled(_hm_at, epsilon, d), rel=1e-9)
    assert advice.best == min(advice.variances, key=lambda n: (advice.variances[n], n))
    assert {"duchi", "pm", "hm"} <= set(advice.skipped)


def test_even_dimensions_favour_duchi_at_moderate_epsilon() -> None:
    """A consequence of the correct even-d constant: at d = 8, ε = 4, Duchi et al.'s vertex
    mechanism beats the sampled hybrid (7.80 against 8.75), while at d = 7 it does not. At d = 7
    the multi-bit mechanism (one attribute at ε, Duchi's one-bit report scaled by d) is best by a
    hair: its worst case is d·((e^ε + 1)/(e^ε − 1))² = 7.5322, at t = 0."""
    assert dpkit.advise_mean(4.0, dimension=8).best == "duchi_multi"
    seven = dpkit.advise_mean(4.0, dimension=7)
    assert seven.variances["hm_multi"] < seven.variances["duchi_multi"]
    assert seven.best == "multibit"
    assert seven.variances["multibit"] == pytest.approx(7 * _duchi(4.0), rel=1e-12)


def test_bad_arguments() -> None:
    for kwargs, field in (
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": 1.0, "lower": 2.0, "upper": 1.0}, "upper"),
        ({"epsilon": 1.0, "dimension": 0}, "dimension"),
        ({"epsilon": 1.0, "n": 0}, "n"),
    ):
        with pytest.raises(dpkit.InvalidParameter, match=field):
            dpkit.advise_mean(**kwargs)
    with pytest.raises(dpkit.InvalidParameter, match="mean_variance"):
        dpkit.advise_mean(1.0, registry=dpkit.load_registry(entry_points=False))


@attrs.frozen
class _Oracle(dpkit.Mechanism):
    """A third-party mean protocol (claims a tiny variance for one value)."""

    name: ClassVar[str] = "tiny_mean"
    kind: ClassVar[Literal["local", "central"]] = "local"

    @classmethod
    def mean_variance(cls, *, epsilon: float, dimension: int = 1, n: int = 1) -> float:
        if dimension != 1:
            raise dpkit.InvalidParameter("dimension", dimension, "1", owner=cls.name)
        return 1e-3 / n


class _Plugin:
    @dpkit.hookimpl
    def dpkit_register_mechanisms(self, register: Callable[[type[dpkit.Mechanism]], None]) -> None:
        register(_Oracle)


def test_third_party_mean_protocols_take_part() -> None:
    registry = dpkit.load_registry(plugins=[("tiny", _Plugin())])
    assert dpkit.advise_mean(1.0, registry=registry).best == "tiny_mean"
    advice = dpkit.advise_mean(1.0, dimension=3, registry=registry)
    assert advice.best != "tiny_mean" and "tiny_mean" in advice.skipped


def test_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", "--mean", "--epsilon", "1", "--lower", "18", "--upper", "90"]) == 0
    text = capsys.readouterr().out
    assert "best protocol hm" in text and "why: hm has the smallest" in text
    assert main(["advise", "--mean", "--epsilon", "4", "--dimension", "8", "--json"]) == 0
    payload: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert payload["best"] == "duchi_multi" and payload["dimension"] == 8
    assert payload["standard_errors"]["hm_multi"] == pytest.approx(
        np.sqrt(payload["variances"]["hm_multi"])
    )
    for args in (["advise", "--epsilon", "1"], ["advise", "--mean", "--k", "4", "--epsilon", "1"]):
        assert main(args) == 2
        assert "k must be given for frequencies, or else --mean" in capsys.readouterr().err
