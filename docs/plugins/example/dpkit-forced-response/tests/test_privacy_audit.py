"""dpkit's privacy audit of this plugin, in one line, through dpkit's pytest plugin.

``dp_check`` (installed with dpkit via the ``pytest11`` entry point) audits the mechanism at the
low, middle and high ends of its declared ``typical`` parameters: the declared pmf exactly, and
the real sampler statistically (each audit false-alarms with probability ≤ 2e-7).
"""

from dpkit_forced_response import ForcedResponse


def test_keeps_its_claimed_epsilon(dp_check):
    dp_check(ForcedResponse)
