"""The public phase judges Python inputs by their structure, never by their values."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from dpkit_central import Histogram, Sum

import dpkit


@pytest.mark.parametrize(
    "make, pairs",
    [
        (lambda: Sum(lower=0, upper=10, epsilon=0.25), ([1, 2, 3], [1, "x", 3], [1, [2, 3], 3])),
        (lambda: dpkit.mechanism("krr", epsilon=0.25, k=3), ([True, False], [True, 2], [0, "z"])),
        (
            lambda: Histogram(categories=("a", "b"), epsilon=0.25),
            (["a", "b"], ["a", 7], ["a", None]),
        ),
    ],
)
def test_python_lists_are_judged_by_structure_not_values(make: Any, pairs: Any) -> None:
    """Whether a Python list holds a text, a bool or a nested list is a value: neighbouring
    lists must all be released and charged alike (a refusal would be a free answer)."""
    session = dpkit.Session(budget=(10.0, 0.0), ledger=":memory:")
    for data in pairs:
        session.release(make(), data, rng=np.random.default_rng(0))
    assert session.spent.epsilon == Fraction(len(pairs), 4)


def test_a_device_array_is_refused_before_the_spend_and_a_host_tensor_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where an array lives is public: a session refuses an accelerator's array before it
    spends (its private phase reads host memory), and reads a torch CPU tensor like numpy."""
    torch = pytest.importorskip("torch")
    import attrs

    from dpkit import session as session_module

    krr = dpkit.mechanism("krr", epsilon=0.25, k=3)
    session = dpkit.Session(budget=(10.0, 0.0), ledger=":memory:")
    release = session.release(krr, torch.tensor([0, 1, 2]), rng=np.random.default_rng(0))
    assert np.asarray(release.values).shape == (3,)
    assert session.spent.epsilon == Fraction(1, 4)

    real = session_module.array_library

    def on_device(values: Any, **kwargs: Any) -> Any:  # a CUDA tensor, as the session sees it
        library = real(values, **kwargs)
        return None if library is None else attrs.evolve(library, on_host=False)

    monkeypatch.setattr(session_module, "array_library", on_device)
    with pytest.raises(dpkit.errors.InvalidData, match="a session reads arrays in host memory"):
        session.release(krr, torch.tensor([0, 1, 2]), rng=np.random.default_rng(0))
    assert session.spent.epsilon == Fraction(1, 4)
