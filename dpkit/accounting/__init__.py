"""Composition of privacy costs: pure functions over a list of ``(event, count)``.

>>> from dpkit.privacy import LaplaceDP, GaussianDP
>>> round(account([(LaplaceDP(epsilon=1.0), 100)], delta=1e-6, method="advanced").epsilon, 2)
83.53
>>> compose_basic([(LaplaceDP(epsilon=0.1), 10)]).exact_epsilon
Fraction(1, 1)

Backends (one module each): :mod:`~dpkit.accounting.basic` (exact sums),
:mod:`~dpkit.accounting.advanced` (Dwork–Rothblum–Vadhan, Kairouz–Oh–Viswanath),
:mod:`~dpkit.accounting.zcdp` (Bun–Steinke; Canonne–Kamath–Steinke conversion),
:mod:`~dpkit.accounting.gdp` (Gaussian DP: Dong–Roth–Su; the currency of fully adaptive filters),
:mod:`~dpkit.accounting.rdp` (Mironov; Balle et al. 2020 conversion; subsampled Gaussian),
:mod:`~dpkit.accounting.pld` (privacy-loss distributions), :mod:`~dpkit.accounting.parallel`;
:func:`account` reports the tightest valid bound among those that apply, and
:func:`calibrate` inverts it (the noise, or the per-query ε, that meets a target).
"""

from __future__ import annotations

from dpkit.accounting._common import Bound, Events, NotApplicable, exact, normalise
from dpkit.accounting.accountant import METHODS, account, compose_exact_gaussian
from dpkit.accounting.advanced import (
    compose_advanced,
    drv_epsilon,
    kov_epsilon,
    kov_optimal_delta,
    kov_optimal_epsilon,
)
from dpkit.accounting.basic import compose_basic, event_cost
from dpkit.accounting.calibration import (
    CALIBRATED_EVENTS,
    Calibration,
    calibrate,
    gaussian_noise_multiplier,
)
from dpkit.accounting.gdp import compose_gdp, event_mu2, gdp_mu_for, pure_mu
from dpkit.accounting.parallel import compose_parallel
from dpkit.accounting.pld import compose_pld
from dpkit.accounting.rdp import ORDERS, compose_rdp, event_rdp, rdp_epsilon
from dpkit.accounting.zcdp import compose_zcdp, event_rho, zcdp_epsilon, zcdp_rho_for

__all__ = [
    "CALIBRATED_EVENTS",
    "METHODS",
    "ORDERS",
    "Bound",
    "Calibration",
    "Events",
    "NotApplicable",
    "account",
    "calibrate",
    "compose_advanced",
    "compose_basic",
    "compose_exact_gaussian",
    "compose_gdp",
    "compose_parallel",
    "compose_pld",
    "compose_rdp",
    "compose_zcdp",
    "drv_epsilon",
    "event_cost",
    "event_mu2",
    "event_rdp",
    "event_rho",
    "exact",
    "gaussian_noise_multiplier",
    "gdp_mu_for",
    "kov_epsilon",
    "kov_optimal_delta",
    "kov_optimal_epsilon",
    "normalise",
    "pure_mu",
    "rdp_epsilon",
    "zcdp_epsilon",
    "zcdp_rho_for",
]
