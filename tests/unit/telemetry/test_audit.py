"""The auditor on the telemetry mechanisms: every one passes at small parameters (both tiers where
they apply, memoized reports included), and deliberately wrong variants are flagged — a sketch
whose client forgets the declared hash key, one that reuses one random word for two draws, and
repeated reports that forget their memo and draw fresh randomness every round.

False positives: each correct audit alarms with probability ≤ 2·ALPHA = 5e-7 (the ε certificate
and the goodness-of-fit test at ALPHA each); the exact tier is deterministic. Power: the true ε
of each wrong variant is stated next to it, far above its claim.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np
import pytest
from dpkit_ldp.count_mean_sketch import CountMeanSketch, HadamardCountMeanSketch
from dpkit_ldp.dbitflip import DBitFlip, draw_buckets
from dpkit_ldp.hadamard import _odd
from dpkit_ldp.items import as_items
from dpkit_ldp.rappor import Rappor

import dpkit
from dpkit.testing import audit, check_mechanism

ALPHA = 2.5e-7
KEY = "c3" * 16


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("cms", {"epsilon": 1.5, "width": 4, "hashes": 2, "key": KEY}),
        ("hcms", {"epsilon": 1.5, "width": 4, "hashes": 2, "key": KEY}),
        ("rappor", {"bits": 2, "hashes": 1, "cohorts": 1, "reports": 3, "key": KEY}),
        ("dbitflip", {"epsilon": 1.5, "k": 4, "d": 2, "reports": 3}),
        ("one_bit_mean", {"epsilon": 1.5, "intervals": 2, "reports": 3}),
        ("treehist", {"epsilon": 1.5, "bits": 2, "step": 1}),
        ("pem", {"epsilon": 1.5, "bits": 4, "top": 1, "step": 2}),
    ],
)
def test_the_telemetry_mechanisms_pass_the_audit(name: str, params: dict[str, Any]) -> None:
    mechanism = dpkit.mechanism(name, **params)
    (report,) = check_mechanism(mechanism, samples=50_000, alpha=ALPHA)
    assert report.statistical.checked
    assert report.exact.checked == (name != "pem")  # pem's hash seeds have no finite space


@attrs.frozen
class KeylessSketch(CountMeanSketch):
    """Declares its key but hashes with the all-zero key (true ε as declared, yet the reports
    follow another law: the auditor's goodness-of-fit must see it)."""

    name: ClassVar[str] = "test_keyless_cms"

    def randomize(self, values: Any, /, *, rng: Any = None) -> np.ndarray:
        client = CountMeanSketch(
            epsilon=self.epsilon, width=self.width, hashes=self.hashes, key="00" * 16
        )
        return client.randomize(values, rng=rng)


@attrs.frozen
class SharedWordSketch(HadamardCountMeanSketch):
    """Draws the column l and reuses its lowest bit as the flip: y = H[h, l] XOR (l & 1) is a
    function of (j, l, x) — no privacy at all (true ε = ∞ against the declared ε)."""

    name: ClassVar[str] = "test_shared_word_hcms"

    def randomize(self, values: Any, /, *, rng: Any = None) -> np.ndarray:
        generator, _ = dpkit.plugin.resolve_rng(rng)
        items = as_items(values, owner=self.name)
        n = items.size
        j = generator.integers(0, self.hashes, size=n, dtype=np.int64)
        column = generator.integers(0, self.columns, size=n, dtype=np.uint64)
        h = self._hashed(items, j).astype(np.uint64)
        flip = (column & np.uint64(1)).astype(bool)  # the same randomness, used twice
        return np.stack([j.astype(np.uint64), column, (~_odd(h & column)) != flip], axis=1).astype(
            np.uint64
        )


@attrs.frozen
class ForgetfulRappor(Rappor):
    """Draws a fresh permanent RR for every report instead of reusing the memoized one: T
    independent reports cost T·ε₁ (here 4·1.02 = 4.09), not the declared ε_4 = 2.13
    (< ε∞ = 2.20)."""

    name: ClassVar[str] = "test_forgetful_rappor"

    def randomize(self, values: Any, /, *, rng: Any = None) -> np.ndarray:
        generator, _ = dpkit.plugin.resolve_rng(rng)
        items = as_items(values, owner=self.name)
        n = items.size
        out = np.empty((n, self.reports, 1 + self.words), dtype=np.uint64)
        out[:, :, 0] = 0
        filters = self.bloom(items.reshape(-1), np.zeros(n, dtype=np.int64))
        for t in range(self.reports):
            out[:, t, 1:] = self.instantaneous(self.permanent(filters, generator), generator)
        return out


@attrs.frozen
class ForgetfulDBitFlip(DBitFlip):
    """Redraws the bits of every memoized report: 4 reports of one value cost 4ε (= 8 with
    d = 1), not the declared ε = 2."""

    name: ClassVar[str] = "test_forgetful_dbitflip"

    def randomize(self, values: Any, /, *, rng: Any = None) -> np.ndarray:
        generator, _ = dpkit.plugin.resolve_rng(rng)
        x = np.asarray(values).reshape(-1).astype(np.int64)
        drawn = draw_buckets(generator, x.size, self.k, self.d)
        buckets = np.broadcast_to(drawn[:, None, :], (x.size, self.reports, self.d))
        out = np.empty((x.size, self.reports, self.d, 2), dtype=np.uint64)
        out[..., 0] = buckets
        out[..., 1] = self._bits(generator, buckets == x[:, None, None])  # fresh every round
        return out


def _rappor_pair(mechanism: Rappor) -> tuple[str, str]:
    """Two items whose one-bit filters differ (so ε is reached)."""
    words = [f"item{i}" for i in range(40)]
    bits = mechanism.filter_bits(words)[:, 0, :]
    first = bits[0]
    other = next(w for w, b in zip(words, bits, strict=True) if not np.array_equal(b, first))
    return words[0], other


@pytest.mark.parametrize(
    ("wrong", "pairs"),
    [
        (KeylessSketch(epsilon=2.0, width=4, hashes=2, key=KEY), None),
        (SharedWordSketch(epsilon=2.0, width=4, hashes=2, key=KEY), None),
        (
            ForgetfulRappor(bits=2, hashes=1, cohorts=1, f=0.5, p=0.25, q=0.75, reports=4, key=KEY),
            "rappor",
        ),
        (ForgetfulDBitFlip(epsilon=2.0, k=2, d=1, reports=4), None),
    ],
    ids=["forgets-the-key", "reuses-a-word", "forgets-the-memo", "redraws-memoized-bits"],
)
def test_wrong_telemetry_variants_are_flagged(wrong: dpkit.plugin.Mechanism, pairs: Any) -> None:
    explicit = [_rappor_pair(wrong)] if pairs == "rappor" else None  # type: ignore[arg-type]
    report = audit(wrong, samples=200_000, alpha=ALPHA, seed=3, pairs=explicit)
    assert report.verdict == "violation", report.format_text()
