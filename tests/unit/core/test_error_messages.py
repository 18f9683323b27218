"""Error messages are written for users: they never show numpy internals.

A message names a type in words ("text", "real numbers") rather than a numpy dtype (``<U3``,
``dtype('float64')``), and quotes a value as the user would have typed it (``7``, ``'walk'``)
rather than as a numpy repr (``np.int64(7)``, ``np.str_('walk')``, ``array([...])``). Values
are only quoted by direct mechanism calls outside a session (see docs/security.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from dpkit_central import Mean, Sum

import dpkit
from dpkit.arrays import describe_dtype, plain
from dpkit.errors import InvalidParameter

#: Fragments of numpy reprs that a message must never contain.
NUMPY_REPRS = ("np.", "dtype(", "of dtype", "got dtype", "<U", "<S", "array(", "float64(", "int64(")

RNG = np.random.default_rng(0)


def _krr(**kw: Any) -> Any:
    return dpkit.mechanism("krr", epsilon=1.0, **({"k": 3} | kw))


CASES: dict[str, Callable[[], Any]] = {
    # wrong dtype
    "krr text without labels": lambda: _krr().randomize(np.array(["walk", "bus"]), rng=RNG),
    "krr floats": lambda: _krr().randomize(np.array([0.5, 1.0]), rng=RNG),
    "krr dates": lambda: _krr().randomize(np.array(["2020-01-01"], dtype="M8[D]"), rng=RNG),
    "rr text": lambda: dpkit.mechanism("rr", keep=0.75).randomize(np.array(["yes"]), rng=RNG),
    "rr bytes": lambda: dpkit.mechanism("rr", keep=0.75).randomize(np.array([b"1"]), rng=RNG),
    "laplace text": lambda: dpkit.mechanism("laplace", epsilon=1.0, sensitivity=1.0).randomize(
        np.array(["1.5"]), rng=RNG
    ),
    "laplace complex": lambda: dpkit.mechanism("laplace", epsilon=1.0, sensitivity=1.0).randomize(
        np.array([1 + 2j]), rng=RNG
    ),
    "sum text (public check)": lambda: Sum(lower=0, upper=10, epsilon=1.0).check_input(
        np.array(["a", "b"])
    ),
    "sum text (run)": lambda: Sum(lower=0, upper=10, epsilon=1.0).run(np.array(["a"]), rng=RNG),
    "mean 2-d": lambda: Mean(lower=0, upper=10, epsilon=1.0).check_input(np.ones((2, 2))),
    "sue reports not packed": lambda: (
        dpkit.get_registry()
        .estimator(dpkit.mechanism("sue", epsilon=1.0, k=4))
        .accumulate(np.array(["x"]))
    ),
    # out-of-domain values in direct randomize calls
    "krr unknown label": lambda: _krr(k=None, categories=["bus", "car"]).randomize(
        np.array(["walk", "bus"]), rng=RNG
    ),
    "krr unknown integer label": lambda: _krr(k=None, categories=[1, 2, 3]).randomize(
        np.array([7]), rng=RNG
    ),
    "krr index out of range": lambda: _krr().randomize(np.array([0, 7]), rng=RNG),
    "rr not 0/1": lambda: dpkit.mechanism("rr", keep=0.75).randomize(np.array([0.5]), rng=RNG),
    "laplace NaN": lambda: dpkit.mechanism("laplace", epsilon=1.0, sensitivity=1.0).randomize(
        np.array([np.nan]), rng=RNG
    ),
    "geometric not whole": lambda: dpkit.mechanism(
        "geometric", epsilon=1.0, sensitivity=1
    ).randomize(np.array([1.5]), rng=RNG),
    # bad parameters, given as numpy scalars and arrays
    "rr keep numpy float": lambda: dpkit.mechanism("rr", keep=np.float64(1.5)),
    "krr epsilon numpy float": lambda: dpkit.mechanism("krr", epsilon=np.float64(-1.0), k=3),
    "krr k numpy int": lambda: dpkit.mechanism("krr", epsilon=1.0, k=np.int64(1)),
    "laplace epsilon numpy float": lambda: dpkit.mechanism(
        "laplace", epsilon=np.float64(-1.0), sensitivity=1.0
    ),
    "sum bounds numpy": lambda: Sum(lower=np.float64(10), upper=np.float64(0), epsilon=1.0),
    "krr categories numpy array": lambda: dpkit.mechanism(
        "krr", epsilon=1.0, categories=np.array(["a", "a", "b"])
    ),
    "secure random dtype": lambda: dpkit.SecureRandom().random(3, dtype=np.int64),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_messages_show_no_numpy_internals(case: str) -> None:
    with pytest.raises(dpkit.DPKitError) as caught:
        CASES[case]()
    message = str(caught.value)
    leaked = [fragment for fragment in NUMPY_REPRS if fragment in message]
    assert not leaked, f"{case}: {message!r} shows {leaked}"
    assert "\n" not in message


def test_types_are_named_in_words() -> None:
    with pytest.raises(dpkit.InvalidData, match="got an array of text"):
        CASES["krr text without labels"]()
    with pytest.raises(dpkit.InvalidData, match="got an array of real numbers"):
        CASES["krr floats"]()
    with pytest.raises(dpkit.InvalidData, match="must be real numbers, got an array of text"):
        CASES["laplace text"]()


def test_values_are_quoted_as_python_values() -> None:
    with pytest.raises(dpkit.InvalidData, match=r"contain 'walk', which is not one"):
        CASES["krr unknown label"]()
    with pytest.raises(dpkit.InvalidData, match=r"contain 7, which is not one"):
        CASES["krr unknown integer label"]()
    with pytest.raises(dpkit.InvalidData, match=r"got 0\.5 "):
        CASES["rr not 0/1"]()
    with pytest.raises(dpkit.InvalidParameter, match=r"keep=1\.5 is not allowed"):
        CASES["rr keep numpy float"]()


@pytest.mark.parametrize(
    ("dtype", "words"),
    [
        ("<U3", "text"),
        (np.int64, "integers"),
        (np.uint8, "integers"),
        (np.float32, "real numbers"),
        (np.bool_, "booleans"),
        (np.complex128, "complex numbers"),
        (object, "Python objects"),
        ("S2", "bytes"),
        ("M8[D]", "dates and times"),
    ],
)
def test_describe_dtype(dtype: Any, words: str) -> None:
    assert describe_dtype(np.dtype(dtype)) == words
    assert describe_dtype(np.zeros(1, dtype=dtype)) == words  # an array: its dtype


def test_plain_values() -> None:
    assert repr(plain(np.int64(7))) == "7"
    assert repr(plain(np.str_("walk"))) == "'walk'"
    assert plain(np.array([1, 2])) == [1, 2]
    assert plain((np.float64(0.5), "x")) == (0.5, "x")
    assert plain("x") == "x"


def test_long_arrays_are_abridged_in_parameter_messages() -> None:
    message = str(InvalidParameter("values", np.arange(1000), "short", owner="f"))
    assert "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ...] (1000 values)" in message
    assert "array(" not in message
