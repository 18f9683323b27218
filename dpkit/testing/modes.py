"""The randomness modes the statistical tier samples, and how an audit's α is shared by them.

A mechanism's ``randomize`` (a query's ``run``) takes different code in each randomness mode
(:mod:`dpkit.randomness.modes`): numpy's samplers in fast mode, dpkit's exact samplers and
integer thresholds in secure mode. Releases use both, so a leak in either branch is a leak,
and the statistical tier samples each mode on its own:

* **fast** — ``numpy.random.default_rng(seed)``, the stream that also draws the random pairs;
* **secure** — ``SecureRandom.from_key(SHA-256("dpkit.testing secure mode:" ‖ seed))``: secure
  mode's code path on a ChaCha20 keystream fixed by the audit's seed, so an audit reproduces.
  Secure mode has two spellings, and a subject may branch on either: half of each batch is
  drawn with that generator passed as ``rng``, the other half with ``rng=None`` while it stands
  in for the process-wide generator (:func:`dpkit.testing.blackbox.both_spellings`); where
  the two share a law, the batch is n independent draws of it, as before.

Each mode gets its own certificate — its own selection batch A, its own event, its own fresh
batch B — at level α/m for the m modes audited, and its goodness-of-fit test at α/m too. By
the union bound a correct mechanism is then flagged with probability at most
m·(α/m + α/m) = 2α, the rate of a one-mode audit at α: auditing both modes keeps the stated
false-positive rate, at the price of a slightly wider Clopper–Pearson bound in each mode.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any, Literal

import numpy as np

from dpkit.errors import InvalidParameter
from dpkit.randomness import SecureRandom

__all__ = ["MODES", "Mode", "check_modes", "mode_alpha", "mode_generator"]

Mode = Literal["fast", "secure"]
#: The modes an audit samples by default, in the order they run and are reported.
MODES: tuple[Mode, ...] = ("fast", "secure")
_KEY_LABEL = b"dpkit.testing secure mode:"


def check_modes(modes: Any, *, owner: str) -> tuple[Mode, ...]:
    """``modes`` as a tuple of distinct names from :data:`MODES` (a single name is accepted),
    or an :class:`~dpkit.errors.InvalidParameter` naming ``modes``."""
    allowed = "a non-empty sequence of distinct modes from ('fast', 'secure')"
    chosen: list[Any] = [modes] if isinstance(modes, str) else _as_list(modes)
    if (
        not chosen
        or len(set(map(repr, chosen))) != len(chosen)
        or any(m not in MODES for m in chosen)
    ):
        raise InvalidParameter("modes", modes, allowed, owner=owner)
    return tuple(chosen)


def _as_list(modes: Any) -> list[Any]:
    return list(modes) if isinstance(modes, Iterable) else []


def mode_alpha(alpha: float, modes: tuple[Mode, ...]) -> float:
    """The level of each mode's certificate (and of its fit test): α split evenly."""
    return alpha / len(modes)


def mode_generator(mode: Mode, seed: int, fast: np.random.Generator) -> Any:
    """The generator a mode's draws come from: ``fast`` itself, or a keyed SecureRandom."""
    if mode == "fast":
        return fast
    key = hashlib.sha256(_KEY_LABEL + str(int(seed)).encode("ascii")).digest()
    return SecureRandom.from_key(key)
