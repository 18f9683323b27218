"""Parameter domains: validation messages and JSON Schemas agree with each other."""

from __future__ import annotations

import math

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dpkit
from dpkit.params import MAX_FLOAT, Boolean, Choice, Integer, Real, Sequence_

DOMAINS = [
    Real(),
    Real(low=0.0, low_open=True),
    Real(low=0.5, high=1.0, low_open=True, high_open=True),
    Integer(low=2),
    Integer(low=0, high=10),
    Boolean(),
    Choice(("analytic", "classic")),
    Sequence_(min_length=2),
    Sequence_(min_length=2, uniform=True),
    Real(low=1e-12, high=700.0),
    Real(low=1e-200, high=1.0, high_open=True),
    Integer(low=0, high=2**128 - 1),
]
#: What a JSON document can hold, at the edges: integers beyond any float, the smallest
#: subnormal and the largest float, integers written as floats, lists mixing kinds.
EDGES = [10**400, -(10**400), 2**128, 2**128 - 1, 5e-324, 1.7976931348623157e308, 1e300]
EDGES += [1e-12, 9.99e-13, 700.0, 700.0000000000001, 1e-200, 1 - 2**-53, 1.0, 2.0, -0.0]
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 20),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-5, max_value=20),
    st.sampled_from(["analytic", "classic", "x"]),
    st.sampled_from(EDGES),
    st.lists(st.one_of(st.text(max_size=2), st.integers(0, 3)), max_size=4),
    st.lists(st.sampled_from([1.0, 2.0, 2, 1.5, "a", 2**70, 1e20]), max_size=4),
)


@pytest.mark.parametrize("domain", DOMAINS, ids=repr)
@given(value=VALUES)
def test_schema_accepts_exactly_what_the_domain_accepts(
    domain: dpkit.params.ParameterDomain, value: object
) -> None:
    try:
        domain.convert(value)
        accepted = True
    except (ValueError, TypeError):
        accepted = False
    valid = jsonschema.Draft202012Validator(domain.json_schema()).is_valid(value)
    if (
        isinstance(domain, Sequence_)
        and isinstance(value, list)
        and any(isinstance(v, bool) for v in value)
    ):
        return  # JSON has no separate bool/int for this check
    assert accepted == valid, (domain, value)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_real_never_accepts_nan_or_infinity(bad: float) -> None:
    with pytest.raises(ValueError):
        Real().convert(bad)


def test_messages_name_owner_parameter_value_and_range() -> None:
    with pytest.raises(dpkit.InvalidParameter) as info:
        dpkit.mechanism("krr", epsilon=-0.5, k=3)
    message = str(info.value)
    assert message == (
        "krr: epsilon=-0.5 is not allowed; epsilon must be a finite real number >= 1e-12 and <= 700"
    )
    assert (info.value.parameter, info.value.value, info.value.owner) == ("epsilon", -0.5, "krr")


def test_real_compares_what_it_is_given_exactly() -> None:
    """An integer beyond the float range is refused (as the schema's bounds refuse it), and a
    bound is checked on the value itself as well as on its float."""
    with pytest.raises(ValueError):
        Real().convert(10**400)
    assert Real().json_schema() == {"type": "number", "minimum": -MAX_FLOAT, "maximum": MAX_FLOAT}
    assert Real(low=0.0, high=1.0, high_open=True).convert(0) == 0.0
    with pytest.raises(ValueError):
        Real(low=1e-12).convert(0)


def test_labels_written_as_integral_floats_are_integers() -> None:
    """JSON Schema's ``integer`` admits 2.0, so the domain reads it as the label 2."""
    assert Sequence_(min_length=2).convert([1.0, 3]) == (1, 3)
    with pytest.raises(ValueError):
        Sequence_(min_length=2).convert([1, 1.0])  # the same label twice
    with pytest.raises(ValueError):
        Sequence_(min_length=2).convert([1.5, 2])
    with pytest.raises(ValueError):
        Sequence_(min_length=2, uniform=True).convert(["a", 2])
