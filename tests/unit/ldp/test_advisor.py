"""The protocol advisor: dpkit.advise and `dpkit advise`."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
import pytest

import dpkit
from dpkit.cli import main


@pytest.mark.parametrize("k", range(2, 41))
def test_grr_is_best_iff_k_below_3e_plus_2(k: int) -> None:
    """Wang et al. 2017, Section 5: GRR beats OUE/OLH iff k < 3e^ε + 2 (10.15 at ε = 1)."""
    advice = dpkit.advise(k, 1.0)
    assert (advice.best == "krr") == (k < 3 * math.e + 2)
    if advice.best != "krr":
        assert advice.best == "oue"  # the integer g of OLH is slightly worse than OUE
    variances = list(advice.variances.values())
    assert variances == sorted(variances)
    assert set(advice.variances) >= {"krr", "sue", "oue", "olh", "hr"}


def test_variances_scale_with_n_and_match_the_mechanisms() -> None:
    one = dpkit.advise(64, 2.0)
    many = dpkit.advise(64, 2.0, n=1000)
    for name, value in one.variances.items():
        assert many.variances[name] == pytest.approx(value / 1000)
        cls = dpkit.get_registry().info(name).cls
        assert cls.frequency_variance(k=64, epsilon=2.0) == value  # type: ignore[attr-defined]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        one.best = "rr"  # type: ignore[misc]


@attrs.frozen
class _Oracle(dpkit.plugin.Mechanism):
    """A third-party frequency oracle that is very good for k ≤ 4 and refuses larger k."""

    name: ClassVar[str] = "tiny_oracle"
    kind: ClassVar[Literal["local", "central"]] = "local"

    @classmethod
    def frequency_variance(cls, *, k: int, epsilon: float, n: int = 1) -> float:
        if k > 4:
            raise dpkit.InvalidParameter("k", k, "at most 4", owner=cls.name)
        return 1e-3 / n


class _Plugin:
    @dpkit.plugin.hookimpl
    def dpkit_register_mechanisms(
        self, register: Callable[[type[dpkit.plugin.Mechanism]], None]
    ) -> None:
        register(_Oracle)


def test_third_party_oracles_take_part() -> None:
    registry = dpkit.load_registry(plugins=[("tiny", _Plugin())])
    assert dpkit.advise(3, 1.0, registry=registry).best == "tiny_oracle"
    advice = dpkit.advise(8, 1.0, registry=registry)
    assert advice.best == "krr" and "tiny_oracle" in advice.skipped
    assert "at most 4" in advice.skipped["tiny_oracle"]


def test_bad_arguments() -> None:
    with pytest.raises(dpkit.InvalidParameter, match="k=1"):
        dpkit.advise(1, 1.0)
    with pytest.raises(dpkit.InvalidParameter, match="epsilon"):
        dpkit.advise(4, -1.0)
    with pytest.raises(dpkit.InvalidParameter, match="frequency_variance"):
        dpkit.advise(4, 1.0, registry=dpkit.load_registry(entry_points=False))


def test_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", "--k", "64", "--epsilon", "1", "--json"]) == 0
    payload: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert payload["best"] == "oue" and payload["k"] == 64
    assert payload["variances"]["oue"] == pytest.approx(4 * math.e / (math.e - 1) ** 2)
    assert main(["advise", "--k", "4", "--epsilon", "1"]) == 0
    out = capsys.readouterr().out
    assert "best protocol krr" in out and "RATIO TO BEST" in out
    assert main(["advise", "--k", "1", "--epsilon", "1"]) == 2
    assert "k=1" in capsys.readouterr().err
    assert np.isfinite(dpkit.advise(2, 30.0).variances["krr"])


def test_cli_without_n_gives_per_user_figures(capsys: pytest.CaptureFixture[str]) -> None:
    """No --n is not n = 1 users: the figures are per user, and say so; --n N divides them."""
    assert main(["advise", "--k", "6", "--epsilon", "1"]) == 0
    out = capsys.readouterr().out
    assert not re.search(r"\bn=1\b", out) and "per user" in out and "n·VAR*[f]" in out
    assert main(["advise", "--k", "6", "--epsilon", "1", "--json"]) == 0
    per_user = json.loads(capsys.readouterr().out)
    assert per_user["n"] is None
    assert main(["advise", "--k", "6", "--epsilon", "1", "--n", "1000", "--json"]) == 0
    at_n = json.loads(capsys.readouterr().out)
    assert at_n["n"] == 1000
    for name, variance in per_user["variances"].items():
        assert at_n["variances"][name] == pytest.approx(variance / 1000)
    assert main(["advise", "--mean", "--epsilon", "1"]) == 0
    assert "per user" in capsys.readouterr().out
