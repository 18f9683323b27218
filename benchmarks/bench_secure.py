"""Secure mode against fast mode, the numpy floor and OpenDP, measured side by side.

Run: ``.venv/bin/python benchmarks/bench_secure.py [--n 1000000] [--bits 10000000] [--repeat 3]``

* randomized response on 10^7 bits: secure (``rng=None``: ChaCha20 words, integer
  thresholds) against fast (a numpy ``Generator``) and the numpy floor ``rng.random(n) < p``;
* the word source: ChaCha20 keystream words against PCG64 ``random_raw``;
* exact samplers (CKS20) on 10^6 draws, in samples per second and as a ratio to numpy's
  float ``laplace``/``normal`` (not attack-resistant; the floor any sampler is compared to);
* exact secure selection (exponential, permute_and_flip, report_noisy_max: discrete Laplace
  on lattice scores) against their float fast mode, with m = 10 and 1000 candidates;
* the central ``gaussian`` mechanism, fast against secure (lattice release), per answer;
* OpenDP's vectorised integer discrete Laplace, when ``opendp`` is importable (it is not a
  dpkit dependency; to include it: ``python -m venv /tmp/odp && /tmp/odp/bin/pip install -e .
  opendp && /tmp/odp/bin/python benchmarks/bench_secure.py``). It is timed on fewer values
  (``--opendp-n``), as it is slow, and reported per value.

Every sampler here runs on one core (numpy, OpenSSL's ChaCha20 and OpenDP are single-threaded
in these calls). Times are best-of-``--repeat``, candidates interleaved so that machine load
affects them alike.
"""

from __future__ import annotations

import argparse
import os
import platform
from collections.abc import Callable

import numpy as np
from _timing import side_by_side

import dpkit
from dpkit.randomness import (
    SecureRandom,
    discrete_gaussian,
    discrete_laplace,
    discrete_laplace_constant_time,
)


def table(title: str, rows: list[tuple[str, float, str]], unit: str) -> None:
    print(f"\n{title}")
    print(f"  {'':54s} {unit:>12s}  ratio")
    for label, rate, ratio in rows:
        print(f"  {label:54s} {rate:12.3f}  {ratio}")


def bench_rr(bits_n: int, repeat: int) -> None:
    values = (np.random.default_rng(1).random(bits_n) < 0.3).astype(np.uint8)
    rr = dpkit.mechanism("rr", epsilon=1.0)
    krr = dpkit.mechanism("krr", epsilon=1.0, k=64)
    categories = np.random.default_rng(2).integers(0, 64, bits_n)
    fast, floor = np.random.default_rng(3), np.random.default_rng(4)
    secure = SecureRandom()
    q = rr.flip_probability
    times = side_by_side(
        {
            "numpy floor: rng.random(n) < p": lambda: floor.random(bits_n) < q,
            "rr fast (numpy Generator)": lambda: rr.randomize(values, rng=fast),
            "rr secure (rng=None)": lambda: rr.randomize(values),
            "krr k=64 fast": lambda: krr.randomize(categories, rng=fast),
            "krr k=64 secure": lambda: krr.randomize(categories, rng=secure),
        },
        repeat,
    )
    per = {label: bits_n / t / 1e6 for label, t in times.items()}
    rows = [
        (label, rate, f"{times[label] / times['rr fast (numpy Generator)']:.2f}x rr fast")
        for label, rate in per.items()
        if not label.startswith("krr")
    ]
    rows += [
        (label, rate, f"{times[label] / times['krr k=64 fast']:.2f}x krr fast")
        for label, rate in per.items()
        if label.startswith("krr")
    ]
    table(f"Randomized response, {bits_n:.0e} values", rows, "M values/s")
    ratio = times["rr secure (rng=None)"] / times["rr fast (numpy Generator)"]
    print(
        f"  target: secure rr within 1.5x of fast rr -> {ratio:.2f}x "
        f"({'met' if ratio <= 1.5 else 'NOT met'})"
    )


def bench_words(n: int, repeat: int) -> None:
    secure = SecureRandom()
    bit_generator = np.random.PCG64(5)
    times = side_by_side(
        {
            "PCG64 random_raw (fast)": lambda: bit_generator.random_raw(n),
            "ChaCha20 words (secure)": lambda: secure.words(n),
        },
        repeat,
    )
    base = times["PCG64 random_raw (fast)"]
    rows = [(label, n / t / 1e6, f"{t / base:.2f}x PCG64") for label, t in times.items()]
    table(f"64-bit words, {n:.0e}", rows, "M words/s")


def opendp_laplace(scale: float) -> Callable[[list[int]], object] | None:
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")
    space = dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int)
    measurement = dp.m.make_laplace(*space, scale=scale)
    return measurement  # type: ignore[no-any-return]


def bench_samplers(n: int, opendp_n: int, repeat: int) -> None:
    secure = SecureRandom()
    fast = np.random.default_rng(6)
    candidates: dict[str, Callable[[], object]] = {
        "numpy float laplace (fast, leaks: floor)": lambda: fast.laplace(0.0, 10.0, n),
        "numpy float normal (fast, leaks)": lambda: fast.normal(0.0, 10.0, n),
    }
    for scale in (1, 10, 1000, 10**6):
        candidates[f"discrete Laplace, scale {scale:g}"] = lambda s=scale: discrete_laplace(
            s, size=n, rng=secure
        )
    for sigma2 in (1, 100, 10**4, 10**6, 10**10):
        candidates[f"discrete Gaussian, sigma^2 {sigma2:g}"] = lambda v=sigma2: discrete_gaussian(
            v, size=n, rng=secure
        )
    for scale in (1, 10, 1000, 10**6):
        candidates[f"constant-time discrete Laplace, scale {scale:g}"] = lambda s=scale: (
            discrete_laplace_constant_time(s, size=n, rng=secure)
        )
    times = side_by_side(candidates, repeat)
    base = times["numpy float laplace (fast, leaks: floor)"]
    rows = [(label, n / t / 1e6, f"{t / base:.1f}x numpy laplace") for label, t in times.items()]
    table(f"Samplers (secure words unless marked), {n:.0e} draws", rows, "M samples/s")

    lap = min(n / times[f"discrete Laplace, scale {s:g}"] for s in (1, 10, 1000, 10**6)) / 1e6
    gauss = (
        min(n / times[f"discrete Gaussian, sigma^2 {v:g}"] for v in (1, 100, 10**4, 10**6, 10**10))
        / 1e6
    )
    print(
        f"  target: exact discrete Laplace >= 1 M/s per core -> slowest scale {lap:.2f} M/s "
        f"({'met' if lap >= 1 else 'NOT met'})"
    )
    print(
        f"  target: discrete Gaussian >= 0.3 M/s -> slowest sigma^2 {gauss:.2f} M/s "
        f"({'met' if gauss >= 0.3 else 'NOT met'})"
    )

    rows = []
    for scale in (1, 10, 1000):
        measurement = opendp_laplace(float(scale))
        if measurement is None:
            print("\n  OpenDP: not installed (import-guarded; see the module docstring)")
            return
        data = [0] * opendp_n
        seconds = side_by_side({"opendp": lambda m=measurement, d=data: m(d)}, repeat)["opendp"]
        ours = times[f"discrete Laplace, scale {scale:g}"] / n
        theirs = seconds / opendp_n
        rows.append(
            (
                f"OpenDP make_laplace (int vector), scale {scale:g}",
                1e-6 / theirs,
                f"dpkit secure is {theirs / ours:.0f}x faster",
            )
        )
    from importlib.metadata import version

    table(
        f"OpenDP {version('opendp')} vectorised discrete Laplace, {opendp_n:.0e} values",
        rows,
        "M samples/s",
    )


def bench_selection(repeat: int, entries: int = 20_000) -> None:
    """Secure (exact) selection against fast (float) selection, m = 10 and 1000 candidates.

    A batch of ``entries // m`` independent selections per call. "counts" are integer
    utilities (the exact gaps stay in uint64); "scores" are normal floats (Python-int gaps;
    report_noisy_max's lattice scores stay int64 for both).
    """
    secure = SecureRandom()
    fast = np.random.default_rng(7)
    mechanisms = {
        name: dpkit.mechanism(name, epsilon=1.0)
        for name in ("exponential", "permute_and_flip", "report_noisy_max")
    }
    rows = []
    for m in (10, 1000):
        batch = entries // m
        data = np.random.default_rng(8)
        utilities = {
            "counts": data.integers(0, 100, (batch, m)).astype(np.float64),
            "scores": data.normal(0.0, 10.0, (batch, m)),
        }
        for kind, u in utilities.items():
            for name, mech in mechanisms.items():
                times = side_by_side(
                    {
                        "fast": lambda me=mech, x=u: me.randomize(x, rng=fast),
                        "secure": lambda me=mech, x=u: me.randomize(x, rng=secure),
                    },
                    repeat,
                )
                for mode in ("fast", "secure"):
                    label = f"{name} {mode}, m={m}, {kind}"
                    ratio = f"{times[mode] / times['fast']:.1f}x fast"
                    rows.append((label, batch / times[mode] / 1e3, ratio))
    table(f"Selection, batches of {entries:.0e} utilities", rows, "k selections/s")


def bench_central_gaussian(n: int, repeat: int) -> None:
    """The ``gaussian`` mechanism: fast (numpy normal) against secure (lattice release with exact
    discrete Gaussian noise, σ_L ≈ 2³⁰ lattice steps), on n answers and on one answer."""
    gaussian = dpkit.mechanism("gaussian", epsilon=1.0, delta=1e-6, sensitivity=1.0)
    values = np.random.default_rng(8).uniform(0.0, 100.0, n)
    fast, floor, secure = np.random.default_rng(9), np.random.default_rng(10), SecureRandom()
    one = np.array([42.0])
    times = side_by_side(
        {
            "numpy floor: x + rng.normal(0, sigma, n)": lambda: (
                values + floor.normal(0.0, gaussian.sigma, n)
            ),
            "gaussian fast (numpy Generator)": lambda: gaussian.randomize(values, rng=fast),
            "gaussian secure (lattice, discrete Gaussian)": lambda: gaussian.randomize(
                values, rng=secure
            ),
        },
        repeat,
    )
    base = times["gaussian fast (numpy Generator)"]
    rows = [(label, n / t / 1e6, f"{t / base:.1f}x gaussian fast") for label, t in times.items()]
    table(f"Central gaussian mechanism, {n:.0e} answers", rows, "M answers/s")
    single = side_by_side(
        {
            "fast": lambda: gaussian.randomize(one, rng=fast),
            "secure": lambda: gaussian.randomize(one, rng=secure),
        },
        repeat,
    )
    print(
        f"  one answer: fast {single['fast'] * 1e6:.0f} us, secure {single['secure'] * 1e6:.0f} us "
        f"({single['secure'] / single['fast']:.1f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--bits", type=int, default=10_000_000)
    parser.add_argument("--opendp-n", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(
        f"dpkit {dpkit.__version__}, numpy {np.__version__}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
    )
    bench_rr(args.bits, args.repeat)
    bench_words(args.bits, args.repeat)
    bench_samplers(args.n, args.opendp_n, args.repeat)
    bench_central_gaussian(args.n, args.repeat)
    bench_selection(args.repeat)


if __name__ == "__main__":
    main()
