"""Parameter domains: validation messages and JSON Schemas agree with each other."""

from __future__ import annotations

import math

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dpkit
from dpkit.params import Boolean, Choice, Integer, Real, Sequence_

DOMAINS = [
    Real(),
    Real(low=0.0, low_open=True),
    Real(low=0.5, high=1.0, low_open=True, high_open=True),
    Integer(low=2),
    Integer(low=0, high=10),
    Boolean(),
    Choice(("analytic", "classic")),
    Sequence_(min_length=2),
]
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 20),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-5, max_value=20),
    st.sampled_from(["analytic", "classic", "x"]),
    st.lists(st.one_of(st.text(max_size=2), st.integers(0, 3)), max_size=4),
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
