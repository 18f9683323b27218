"""dpkit's privacy audit of this plugin, through dpkit's pytest plugin.

``dp_check`` (installed with dpkit via the ``pytest11`` entry point) audits each mechanism at the
low, middle and high ends of its declared ``typical`` parameters: the declared pmf exactly, and
the real sampler statistically in both randomness modes — fast (a numpy Generator) and secure
(a keyed SecureRandom, which runs the integer-threshold branch) — each audit false-alarming
with probability ≤ 2e-7, both modes together. The numeric
mechanism's neighbouring inputs come from its ``dpkit.Interval`` domain; the last test adds a
pair of its own, which the auditor checks against the domain before it runs.
"""

import pytest
from dpkit_forced_response import ForcedResponse, NumericForcedResponse

import dpkit


def test_keeps_its_claimed_epsilon(dp_check):
    dp_check(ForcedResponse)


def test_numeric_version_keeps_its_claimed_epsilon(dp_check):
    dp_check(NumericForcedResponse)


def test_numeric_version_on_pairs_of_our_own(dp_check):
    mechanism = NumericForcedResponse(low=18, high=90)
    dp_check(mechanism, pairs=[(18, 19), (40, 65)])
    with pytest.raises(dpkit.InvalidParameter):  # 95 is not an answer in [18, 90]
        dp_check(mechanism, pairs=[(18, 95)])
