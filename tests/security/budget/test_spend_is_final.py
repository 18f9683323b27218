"""A spend is final: it cannot be aborted (an interrupt while its data are read, a release that fails
afterwards) and nothing is refunded.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpkit


def test_a_spend_cannot_be_aborted_while_its_data_are_read(tmp_path: Path) -> None:
    """Attack: ``Ledger.abort`` gives back a spend whose result is not stored yet (meant for a
    reservation whose data were never read). A session's release stores its result only after
    the run, so a second handle on the ledger (another thread or process; here the analyst's
    own loader) could abort the spend *while the data are read* — the release still came out,
    and record_result's refusal was swallowed. Five releases at ε = 1 came out of a budget of
    ε = 1. Now a session's spend is final from its commit: abort refuses it."""
    from dpkit.ledger import Ledger

    path = str(tmp_path / "l.sqlite")
    session = dpkit.Session(budget=(1.0, 0.0), ledger=path)
    other = Ledger(path)
    refunds = []

    def load() -> Any:
        try:
            other.abort(other.entries()[-1].release_id)
            refunds.append(True)
        except dpkit.DPKitError:
            refunds.append(False)
        return np.array([1.0, 2.0, 3.0])

    laplace = dpkit.mechanism("laplace", epsilon=1.0, sensitivity=1.0)
    released = 0
    for _ in range(5):
        try:
            session.release(laplace, dpkit.session.Deferred(load), rng=np.random.default_rng(0))
            released += 1
        except dpkit.BudgetExceeded:
            break
    assert refunds == [False] and released == 1
    assert Fraction(session.spent.epsilon) == 1
    other.close()


def test_a_failed_release_cannot_be_aborted(tmp_path: Path) -> None:
    """Attack: a release whose target raises keeps its spend (``ReleaseFailed``), so that
    whether it raises — which may depend on the data — is not free. Its result was never
    stored, so ``session.ledger.abort(release_id)`` gave the spend back, and the failure oracle
    could be asked again and again for free. Now the spend stands."""

    class Fails:
        name = "fails"
        privacy = dpkit.PureDP(epsilon=0.5)

        def run(self, data: Any, /, *, rng: Any) -> Any:
            raise ValueError("a data-dependent failure")

    session = dpkit.Session(budget=(1.0, 0.0), ledger=str(tmp_path / "l.sqlite"))
    with pytest.raises(dpkit.ReleaseFailed) as failed:
        session.release(Fails(), [1, 2, 3], rng=np.random.default_rng(0))
    release_id = failed.value.release_id
    with pytest.raises(dpkit.DPKitError):
        session.ledger.abort(release_id)
    assert Fraction(session.spent.epsilon) == Fraction(1, 2)
