"""Every registered mechanism's ``coerce`` maps neighbours to neighbours.

Parametrised over the registry at collection time (built-ins and third-party plugins such as
the example ``dpkit-forced-response``), each at its parameter points:
:func:`dpkit.testing.check_coerce` draws inputs that the mechanism's public check accepts —
every integer width, float16/32/64, booleans, object arrays of Python and numpy numbers,
holding halves, ±0, 2⁵³ ± 1, the largest integers, ±inf and NaN — and neighbours of them under
the declared domain (within Δ in its norm, exactly), and demands that ``coerce`` (the private
phase's map into the domain) keeps them within Δ; a local mechanism's ``coerce`` must be total
and keep one output per record.

False-positive rate: 0. The check is deterministic given the drawn inputs (exact rational
arithmetic; a relative slack of 1e-12 on Δ for the last-bit rounding of an exact input into a
double), and Hypothesis is derandomized (``check_coerce`` fixes its settings: no database, the
same examples on every run).
"""

from __future__ import annotations

import pytest

import dpkit
from dpkit.testing import check_coerce

REGISTRY = dpkit.load_registry()
#: Open defect (strict xfail: it fails once fixed, then delete the line): these mechanisms'
#: ``coerce`` reads integer answers beyond 2⁵³ (int64, uint64, Python ints) as the nearest
#: double, so the neighbours 2⁵³ + 1 and 2⁵³ + 2 (Δ = 1 apart) become 2⁵³ and 2⁵³ + 2.
ROUNDED_BEYOND_2_53 = ("exponential", "gaussian", "laplace", "permute_and_flip", "report_noisy_max")


def _marked(name: str) -> object:
    if name not in ROUNDED_BEYOND_2_53:
        return name
    reason = "coerce rounds integer answers beyond 2**53 to the nearest double (2 apart)"
    return pytest.param(
        name, marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)
    )


@pytest.mark.parametrize("name", [_marked(name) for name in REGISTRY.names()])
def test_coerce_keeps_neighbours_neighbours(name: str) -> None:
    check_coerce(REGISTRY.info(name).cls)
