"""What is charged is what runs: a deferred batch is charged for what it loads."""

from __future__ import annotations

import numpy as np
import pytest

import dpkit


def test_a_deferred_batch_is_charged_for_what_it_loads() -> None:
    """A loader that declares one release but returns 1000 selections must not run them for
    the price of one: it fails closed, with the declared spend kept and nothing released."""
    session = dpkit.Session(budget=(5.0, 0.0), ledger=":memory:")
    noisy_max = dpkit.mechanism("report_noisy_max", epsilon=1.0)
    utilities = np.tile([0.0, 0.0, 50.0, 0.0], (1000, 1))
    with pytest.raises(dpkit.ReleaseFailed):
        session.release(noisy_max, dpkit.session.Deferred(lambda: utilities))
    assert session.spent.epsilon == 1
    honest = session.release(noisy_max, dpkit.session.Deferred(lambda: utilities[:3], releases=3))
    assert honest.values.shape == (3,) and session.spent.epsilon == 4
    for bad in (True, 0.5, "2"):
        with pytest.raises(dpkit.InvalidParameter):
            session.release(noisy_max, dpkit.session.Deferred(lambda: utilities, releases=bad))  # type: ignore[arg-type]
    assert session.spent.epsilon == 4
