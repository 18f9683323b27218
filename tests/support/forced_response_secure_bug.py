"""Forced response with a deliberate bug in its secure branch only (the plugin guide's "× 2").

The design is the example plugin's (``docs/plugins/example/dpkit-forced-response``): a forced
"yes" with probability ``forced_yes``, a forced "no" with ``forced_no``, the truth otherwise,
so ε = max(ln((1 − forced_no)/forced_yes), ln((1 − forced_yes)/forced_no)) (Boruch 1971; Fox
& Tracy 1986, §2.3). The fast branch is right. The secure branch scales its uniform by 2, so
each forced answer comes half as often and the truth is kept more: at the defaults (1/6 each)
the true ε is ln((1 − 1/12)/(1/12)) = ln 11 = 2.40 against the claimed ln 5 = 1.61. The
declared distribution is right, so only sampling in secure mode can see the bug.

Registered as a plugin by :class:`Plugin` (for ``dpkit audit``), and read as a file by the
pytest-plugin test (for ``dp_check``).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import attrs
import numpy as np

import dpkit

_PROBABILITY = dpkit.Real(low=0.0, high=1.0, low_open=True, high_open=True)


@attrs.frozen
class SecureDoubledForcedResponse(dpkit.Mechanism):
    name: ClassVar[str] = "secure_doubled_forced_response"
    kind: ClassVar[Literal["local", "central"]] = "local"

    forced_yes: float = dpkit.parameter(
        _PROBABILITY, doc="probability of a forced 'yes'", default=1 / 6, typical=(0.05, 0.45)
    )
    forced_no: float = dpkit.parameter(
        _PROBABILITY, doc="probability of a forced 'no'", default=1 / 6, typical=(0.05, 0.45)
    )

    @property
    def domain(self) -> dpkit.CategoricalDomain:
        return dpkit.CategoricalDomain(2)

    @property
    def privacy(self) -> dpkit.PureDP:
        return dpkit.PureDP(
            epsilon=max(
                math.log((1 - self.forced_no) / self.forced_yes),
                math.log((1 - self.forced_yes) / self.forced_no),
            )
        )

    def randomize(self, values: Any, /, *, rng: Any = None) -> np.ndarray:
        generator, _ = dpkit.resolve_rng(rng, owner=self.name)
        answers = np.asarray(values, dtype=np.int64)
        if isinstance(generator, dpkit.SecureRandom):
            u = 2 * generator.random(answers.shape)  # the bug: × 2
        else:
            u = generator.random(answers.shape)
        forced_yes = u < self.forced_yes
        forced_no = (u >= self.forced_yes) & (u < self.forced_yes + self.forced_no)
        return np.where(forced_yes, 1, np.where(forced_no, 0, answers))

    def log_probability(self, outputs: Any, inputs: Any, /) -> np.ndarray:
        y, x = np.broadcast_arrays(np.asarray(outputs), np.asarray(inputs))
        p_yes = np.where(x == 1, 1 - self.forced_no, self.forced_yes)
        return np.log(np.where(y == 1, p_yes, 1 - p_yes))

    def output_space(self) -> np.ndarray:
        return np.arange(2)


class Plugin:
    @dpkit.hookimpl
    def dpkit_register_mechanisms(self, register: Any) -> None:
        register(SecureDoubledForcedResponse)
