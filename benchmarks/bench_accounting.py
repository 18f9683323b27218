"""Accounting speed: each backend against the numpy floor of the same shape, measured together.

Run: ``nice .venv/bin/python benchmarks/bench_accounting.py [--repeat 5]``

Floors, the least work an implementation of each answer must do:
* exact Gaussian: one evaluation of Balle & Wang's δ(ε) (two ``math.erfc`` calls) × the ~60
  bisection steps any root-finder needs (so the floor is 60 δ evaluations);
* RDP: one vectorised pass over the order grid per event (``np.logaddexp`` on ``len(ORDERS)``
  values), plus, for the subsampled Gaussian, one log-sum-exp over the binomial terms of each
  integer order;
* PLD: one forward and one inverse real FFT of the composed grid's size.
Ratios are dpkit / floor (lower is better). The CLI row is the wall time of
``dpkit account`` in a fresh process (interpreter start and imports included), against
``python -c "import numpy"``. If ``dp_accounting`` is importable, its RDP accountant is timed
on the same subsampled-Gaussian question.
"""

from __future__ import annotations

import argparse
import math
import platform
import subprocess
import sys

import numpy as np
from _timing import best_time

import dpkit
from dpkit.accounting import ORDERS, account
from dpkit.privacy import GaussianDP, LaplaceDP, SubsampledDP, gaussian_delta


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    r = args.repeat

    gaussian = [(GaussianDP(1.0, 1e-5), 1000)]
    sgd = [(SubsampledDP(GaussianDP(1.0, 1e-5), 0.01), 1000)]
    laplace = [(LaplaceDP(1.0), 100)]

    def gauss_floor() -> None:
        for _ in range(60):
            gaussian_delta(600.0, 1 / math.sqrt(1000))

    integer_orders = [int(a) for a in ORDERS if a >= 2 and a == int(a)]

    def rdp_floor() -> None:
        np.logaddexp(ORDERS, ORDERS)
        for a in integer_orders:
            terms = np.arange(a + 1, dtype=float)
            np.log(np.exp(terms - terms.max()).sum())

    def pld_floor() -> None:
        n = 1 << 20
        np.fft.irfft(np.fft.rfft(np.ones(n)), n)

    rows = [
        ("k-fold Gaussian, exact (k=1000)", lambda: account(gaussian, delta=1e-5), gauss_floor),
        (
            "subsampled Gaussian, rdp (q=0.01, 1000 steps)",
            lambda: account(sgd, delta=1e-5, method="rdp"),
            rdp_floor,
        ),
        ("100 x Laplace(1), pld", lambda: account(laplace, delta=1e-6, method="pld"), pld_floor),
        ("100 x Laplace(1), best (all backends)", lambda: account(laplace, delta=1e-6), pld_floor),
    ]
    print(f"dpkit {dpkit.__version__}, numpy {np.__version__}, Python {platform.python_version()}")
    print(f"{'question':48} {'dpkit s':>10} {'floor s':>10} {'ratio':>8}  answer")
    for label, fn, floor in rows:
        ours = best_time(fn, r)
        base = best_time(floor, r)
        answer = fn()
        print(
            f"{label:48} {ours:10.5f} {base:10.5f} {ours / base:8.2f}  ε={answer.epsilon:.4f} ({answer.method})"
        )

    cli = [
        sys.executable,
        "-m",
        "dpkit.cli",
        "account",
        "--method",
        "rdp",
        "--delta",
        "1e-5",
        "subsampled_gaussian(noise_multiplier=1.0,sampling_rate=0.01)*1000",
    ]
    ours = best_time(lambda: subprocess.run(cli, check=True, capture_output=True), r)
    base = best_time(lambda: subprocess.run([sys.executable, "-c", "import numpy"], check=True), r)
    print(
        f"{'dpkit account (fresh process), rdp 1000 steps':48} {ours:10.5f} {base:10.5f} {ours / base:8.2f}"
    )

    try:
        from dp_accounting import dp_event, rdp
    except ImportError:
        print("dp_accounting not importable: peer row skipped")
        return
    event = dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(1.0))

    def peer() -> float:
        accountant = rdp.RdpAccountant()
        accountant.compose(event, 1000)
        return float(accountant.get_epsilon(1e-5))

    t = best_time(peer, r)
    print(f"{'dp_accounting RDP, same question':48} {t:10.5f} {'':10} {'':8}  ε={peer():.4f}")


if __name__ == "__main__":
    main()
