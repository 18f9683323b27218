"""Doubles bracketing e^(−k/64), k = 0 … 64·512: the proposal weights and the coins' second
factor of the exact selections (``dpkit_central._selection`` on the host,
:mod:`dpkit.tensors.exp_coins` on a device), so both read one table.

Powers of q = e^(−1/64), correctly rounded to 40 digits, by repeated 40-digit multiplication:
after k ≤ 32 768 steps the relative error is below 32 769·10⁻³⁹, so the double nearest each
value is within one ulp of e^(−k/64), and two steps outward bracket it.
"""

from __future__ import annotations

import decimal
import functools

import numpy as np
from numpy.typing import NDArray

__all__ = ["EXP_TABLE_CAP", "EXP_TABLE_STEPS", "exp_table"]

#: Table entries per unit of the exponent: entry k is e^(−k/64).
EXP_TABLE_STEPS = 64
#: The last entry, e^(−512).
EXP_TABLE_CAP = 64 * 512


@functools.lru_cache(maxsize=1)
def exp_table() -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(upper, lower): doubles with lower[k] ≤ e^(−k/64) ≤ upper[k] (module docstring); entry
    0 is 1 exactly. The arrays are shared (cached): read them, never write."""
    context = decimal.Context(prec=40)
    q = context.exp(context.divide(-1, EXP_TABLE_STEPS))
    power = decimal.Decimal(1)
    values = [1.0]
    for _ in range(EXP_TABLE_CAP):
        power = context.multiply(power, q)
        values.append(float(power))
    nearest = np.array(values)
    upper = np.nextafter(np.nextafter(nearest, np.inf), np.inf)
    lower = np.nextafter(np.nextafter(nearest, 0.0), 0.0)
    upper[0] = lower[0] = 1.0  # e^0 exactly
    return upper, lower
