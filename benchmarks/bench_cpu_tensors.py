"""Host tensors through dpkit: a torch CPU tensor and a CPU JAX array against a numpy array.

    python benchmarks/bench_cpu_tensors.py                  # prints and publishes (cpu_tensors)
    python benchmarks/bench_cpu_tensors.py --values 100000 --no-save   # quick, prints only

A torch CPU tensor or a CPU JAX array takes dpkit's numpy path (a view of its memory where the
library allows it, a copy where it does not) and comes back in its own type, so the work is the
numpy path's and the difference is the conversions in and out. The target (docs/tensors.md) is
within 1.2× of the numpy array. Every task runs on the same values in the three types, in
secure mode (ChaCha20, ``rng=None``) and fast mode (a seeded numpy ``Generator``; the library's
own generator seeds the same numpy path), through :func:`_timing.measure`: the contenders
alternate round by round and a ratio is the median of the per-round CPU-time ratios.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import Run
from _timing import measure, ratio

import dpkit

#: (task, mechanism, its values as numpy) on ``n`` values; wide reports on a tenth as many.
Task = tuple[str, Any, np.ndarray[Any, Any]]


def _tasks(n: int) -> list[Task]:
    data = np.random.default_rng(7)
    small = max(n // 10, 1)
    reals = data.random(n)
    categories = data.integers(0, 64, n)
    items = data.integers(0, 2**32, small)
    side = max(int(np.sqrt(n)), 2)
    upper = np.triu(data.random((side, side)) < 0.01, 1)
    adjacency = (upper | upper.T).astype(np.uint8)
    mechanism = dpkit.mechanism
    return [
        ("rr on an adjacency (randomize)", mechanism("rr", epsilon=1.0), adjacency),
        ("laplace noise", mechanism("laplace", epsilon=1.0), reals),
        ("gaussian noise", mechanism("gaussian", epsilon=1.0, delta=1e-6), reals),
        ("geometric noise", mechanism("geometric", epsilon=1.0), categories),
        ("duchi reports", mechanism("duchi", epsilon=1.0, lower=0.0, upper=1.0), reals),
        ("pm reports", mechanism("pm", epsilon=1.0, lower=0.0, upper=1.0), reals),
        ("krr reports (k = 64)", mechanism("krr", epsilon=1.0, k=64), categories),
        ("oue reports (k = 64)", mechanism("oue", epsilon=1.0, k=64), categories),
        ("olh reports (k = 64)", mechanism("olh", epsilon=1.0, k=64), categories),
        (
            "cms reports",
            mechanism("cms", epsilon=4.0, width=1024, hashes=64, key="c3" * 16),
            items,
        ),
        ("pem reports", mechanism("pem", epsilon=4.0, bits=32, top=16), items),
    ]


def _libraries() -> dict[str, Callable[[np.ndarray[Any, Any]], Any]]:
    """numpy, and each host tensor library installed here, as a conversion of numpy values."""
    converters: dict[str, Callable[[np.ndarray[Any, Any]], Any]] = {"numpy": lambda a: a}
    try:
        import torch

        converters[f"torch {torch.__version__} CPU tensor"] = torch.from_numpy
    except ImportError:
        pass
    try:
        import jax

        jax.config.update("jax_enable_x64", True)  # dpkit refuses JAX arrays without it
        import jax.numpy as jnp

        converters[f"JAX {jax.__version__} CPU array"] = jnp.asarray
    except ImportError:
        pass
    return converters


def _release(mechanism: Any, values: Any, mode: str) -> Callable[[], Any]:
    """One release of ``values``: secure (ChaCha20) or fast (a seeded numpy generator)."""
    if mode == "secure":
        return lambda: mechanism.randomize(values)
    return lambda: mechanism.randomize(values, rng=np.random.default_rng(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--values", type=int, default=1_000_000, help="values per task")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--no-save", action="store_true", help="print only")
    args = parser.parse_args()
    run = Run(
        "cpu_tensors",
        "python benchmarks/bench_cpu_tensors.py",
        harness={"values": args.values, "rounds": args.rounds},
    )
    converters = _libraries()
    names = list(converters)
    rows = []
    for task, mechanism, values in _tasks(args.values):
        inputs = {name: convert(values) for name, convert in converters.items()}
        for mode in ("secure", "fast"):
            contenders = {name: _release(mechanism, x, mode) for name, x in inputs.items()}
            timed = measure(contenders, rounds=args.rounds)
            row: dict[str, Any] = {
                "task": task,
                "mode": mode,
                "numpy cpu ms": round(timed["numpy"].cpu * 1e3, 2),
            }
            for name in names[1:]:
                row[f"{name} ÷ numpy"] = round(ratio(timed[name], timed["numpy"]), 3)
            rows.append(row)
            print("  ".join(f"{value}" for value in row.values()), flush=True)
    if not args.no_save:
        run.save(
            title=f"Host tensors through dpkit against numpy arrays ({args.values:.0e} values)",
            columns=list(rows[0]),
            rows=rows,
            notes=[
                "Ratios are medians of per-round CPU-time ratios measured in one run; the "
                "target is 1.2. The wide reports (cms, pem) are on a tenth as many values, rr "
                "on a √n × √n adjacency.",
            ],
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
