"""A plugin's mechanism that declares no device path and records what its methods receive:
for the tests of how arrays reach a mechanism's methods (every built-in has a device path)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs
import numpy as np

import dpkit

#: What the recorder's methods were given, in order (cleared by the tests that read it).
SEEN: list[Any] = []


@attrs.frozen
class Recorder(dpkit.plugin.Mechanism):
    name: ClassVar[str] = "recorder"
    kind: ClassVar[Literal["local", "central"]] = "local"

    @property
    def domain(self) -> dpkit.plugin.CategoricalDomain:
        return dpkit.plugin.CategoricalDomain(2)

    @property
    def privacy(self) -> dpkit.PureDP:
        return dpkit.PureDP(epsilon=1.0)

    def randomize(self, values: Any, /, *, rng: Any = None) -> Any:
        SEEN.append(values)
        return np.asarray(values) + 1, "note"

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        SEEN.append(outputs)
        return np.zeros(np.broadcast_shapes(np.shape(outputs), np.shape(inputs)))
