"""Every registered mechanism's ``coerce`` maps neighbours to neighbours.

Parametrised over the registry at collection time (built-ins and third-party plugins such as
the example ``dpkit-forced-response``), each at its parameter points:
:func:`dpkit.testing.check_coerce` draws inputs that the mechanism's public check accepts —
every integer width, float16/32/64, booleans, object arrays of Python and numpy numbers,
holding halves, ±0, 2⁵³ ± 1, the largest integers, ±inf and NaN — and neighbours of them under
the declared domain (within Δ in its norm, exactly), and demands that ``coerce`` (the private
phase's map into the domain) keeps them within Δ; a local mechanism's ``coerce`` must be total
and keep one output per record. A central mechanism's direct ``randomize`` (``direct=True``)
must read what it accepts as its ``coerce`` does: it released other values than
``randomize(coerce(x))`` on the same words where it rounded 64-bit integers to the nearest
double (2⁵³ + 3 to 2⁵³ + 4, one unit more than its neighbour 2⁵³ + 2 moved).

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


@pytest.mark.parametrize("name", REGISTRY.names())
def test_coerce_keeps_neighbours_neighbours(name: str) -> None:
    check_coerce(REGISTRY.info(name).cls, direct=True)
