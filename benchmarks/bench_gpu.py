# ruff: noqa: N803  (Triton compile-time constants are upper case)
"""Randomized response on a GPU: dpkit on device tensors against the floors a GPU programmer
would write, the seed's torch code, and dpkit's numpy path on the CPU.

    python benchmarks/bench_gpu.py --out gpu.json                 # on a machine with CUDA
    python benchmarks/bench_gpu.py --nodes 8192 --out gpu.json     # a smaller adjacency
    python benchmarks/bench_gpu.py --results benchmarks/results.json   # also publish (section gpu)

The task is the source material's: ε = 1 randomized response on a symmetric n × n 0/1
adjacency (uint8) on the device, n = 32 768 by default (1.07·10⁹ entries). Contenders:

* ``copy`` — ``x.clone()``: reading and writing the same bytes, the memory limit;
* ``fused floor`` — one Triton kernel: one Philox call gives 4 uniforms, each compared with the
  flip probability and xor-ed into 4 elements (the fastest fast-mode code; **the floor**);
* ``torch ops`` — ``x ^ (torch.rand(x.shape) < p)``;
* ``seed`` — the source material's ``matrix_randomized_response`` (float32 probabilities and
  ``torch.bernoulli``);
* dpkit ``rr.randomize`` (every entry drawn) and ``rr.randomize_graph`` (one draw per pair
  i < j, mirrored), secure (ChaCha20 on the device, ``rng=None``) and fast (a
  ``torch.Generator``);
* the same graph in ``randomize_graph``'s bit-packed, coordinate and compressed-row layouts
  (``output="packed"``, ``"coo"``, ``"csr"``; a table of its own, with each call's peak
  device memory: n² bytes dense, n²/8 packed, 16 a reported pair as coordinates or rows);
* dpkit's numpy path on the CPU, on a smaller matrix (``--cpu-nodes``), scaled per entry;
* a torch CPU tensor against a numpy array of the same size through dpkit (same numpy path).

Times are CUDA-event medians of ``--reps`` calls after two warm-up calls (Triton compiles in
the first); each dpkit call includes its host synchronisation (the 0/1 check's flag).

A second table (section ``gpu_mechanisms``) times the other device paths on ``--values``
values (10⁸ by default; a tenth as many for duchi_multi and the telemetry protocols, whose
reports are wide), secure and fast, each against the plain torch code a GPU programmer
would write for the same task without dpkit's guarantees (its floor): central noise against
``torch.randn`` / two exponentials differenced, the numeric reports against a ``torch.rand``
comparison, the reports of the frequency and telemetry protocols against drawing random words
of the reports' size, and the estimators' sums against ``bincount`` / ``sum``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import dpkit


def _floor_kernel() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def _flip_run(x_ptr, out_ptr, offsets, n, u, p):  # type: ignore[no-untyped-def]
        inside = offsets < n
        x = tl.load(x_ptr + offsets, mask=inside)
        tl.store(out_ptr + offsets, x ^ (u < p).to(tl.uint8), mask=inside)

    @triton.jit
    def flip4(x_ptr, out_ptr, n, seed, p, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        pid = tl.program_id(0).to(tl.int64)
        lane = tl.arange(0, BLOCK).to(tl.int64)
        u0, u1, u2, u3 = tl.rand4x(seed, pid * BLOCK + lane)
        base = pid * (4 * BLOCK) + lane
        _flip_run(x_ptr, out_ptr, base, n, u0, p)
        _flip_run(x_ptr, out_ptr, base + BLOCK, n, u1, p)
        _flip_run(x_ptr, out_ptr, base + 2 * BLOCK, n, u2, p)
        _flip_run(x_ptr, out_ptr, base + 3 * BLOCK, n, u3, p)

    return flip4


def _cuda_time(fn: Any, reps: int) -> float:
    import torch

    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def _cpu_time(fn: Any, reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def seed_matrix_randomized_response(x: Any, eps: float) -> Any:
    """The source material's function, as given (not secure: torch's Philox in float32)."""
    import torch

    x = x.to(torch.bool)
    em = math.exp(eps)
    flip_prob = 1.0 / (em + 1)
    p = torch.full_like(x, 1 - flip_prob, dtype=torch.float32)
    keep_mask = torch.bernoulli(p).to(torch.bool)
    return (~(x ^ keep_mask)).to(torch.float)


def _mechanism_tasks(device: Any, n: int, generator: Any) -> list[tuple[str, Any, Any, Any]]:
    """(task, floor, dpkit secure, dpkit fast) for the device paths beyond randomized response,
    on ``n`` values of each kind."""
    import torch

    def uniform(size: Any) -> Any:
        return torch.rand(size, device=device, generator=generator, dtype=torch.float64)

    def words(*shape: int) -> Any:
        return torch.randint(0, 2**62, shape, device=device, generator=generator)

    small = max(n // 10, 1)  # the protocols with wide reports: a tenth as many values
    reals = uniform(n)
    categories = torch.randint(0, 64, (n,), device=device, generator=generator)
    few_categories = categories[:small]
    items = torch.randint(0, 2**32, (small,), device=device, generator=generator)
    rows = uniform((small // 8, 8))
    laplace = dpkit.mechanism("laplace", epsilon=1.0)
    gaussian = dpkit.mechanism("gaussian", epsilon=1.0, delta=1e-6)
    duchi = dpkit.mechanism("duchi", epsilon=1.0, lower=0.0, upper=1.0)
    duchi_multi = dpkit.mechanism("duchi_multi", epsilon=1.0, lower=0.0, upper=1.0, dimension=8)
    krr = dpkit.mechanism("krr", epsilon=1.0, k=64)
    oue = dpkit.mechanism("oue", epsilon=1.0, k=64)
    olh = dpkit.mechanism("olh", epsilon=1.0, k=64)
    dbitflip = dpkit.mechanism("dbitflip", epsilon=1.0, k=64, d=4)
    cms = dpkit.mechanism("cms", epsilon=4.0, width=1024, hashes=64, key="c3" * 16)
    pem = dpkit.mechanism("pem", epsilon=4.0, bits=32, top=16)
    treehist = dpkit.mechanism("treehist", epsilon=4.0, bits=32, top=16)
    registry = dpkit.get_registry()
    krr_reports: Any = krr.randomize(categories, rng=generator)
    duchi_reports = duchi.randomize(reals, rng=generator)
    krr_server, duchi_server = registry.estimator(krr), registry.estimator(duchi)

    def two_exponentials() -> Any:
        return reals + (
            torch.empty_like(reals).exponential_() - torch.empty_like(reals).exponential_()
        )

    def each(mechanism: Any, values: Any) -> tuple[Any, Any]:
        return (lambda: mechanism.randomize(values)), (
            lambda: mechanism.randomize(values, rng=generator)
        )

    return [
        ("laplace noise", two_exponentials, *each(laplace, reals)),
        ("gaussian noise", lambda: reals + torch.randn_like(reals), *each(gaussian, reals)),
        ("duchi reports", lambda: torch.where(uniform(n) < reals, 1.0, -1.0), *each(duchi, reals)),
        (
            "duchi_multi reports (d = 8)",
            lambda: torch.where(uniform(rows.shape) < rows, 1.0, -1.0),
            *each(duchi_multi, rows),
        ),
        ("krr reports (k = 64)", lambda: words(n), *each(krr, categories)),
        ("oue reports (k = 64, packed)", lambda: words(n), *each(oue, categories)),
        ("olh reports (a, b, y)", lambda: words(n, 3), *each(olh, categories)),
        ("dbitflip reports (d = 4)", lambda: words(small, 4, 2), *each(dbitflip, few_categories)),
        ("cms reports (j, row)", lambda: words(small, 1 + 1024 // 64), *each(cms, items)),
        ("pem reports", lambda: words(small, 5), *each(pem, items)),
        ("treehist reports", lambda: words(small, 5), *each(treehist, items)),
        (
            "krr counts (estimator)",
            lambda: torch.bincount(krr_reports, minlength=64),
            lambda: krr_server.accumulate(krr_reports),
            None,
        ),
        (
            "duchi sums (estimator)",
            lambda: (duchi_reports.sum(), (duchi_reports * duchi_reports).sum()),
            lambda: duchi_server.accumulate(duchi_reports),
            None,
        ),
    ]


def _mechanism_rows(device: Any, n: int, reps: int, timer: Any) -> list[dict[str, Any]]:
    import torch

    generator = torch.Generator(device=device).manual_seed(3)
    rows = []
    print(f"device paths on {n:.3g} values (floor: plain torch code for the same task)")
    for task, floor, secure, fast in _mechanism_tasks(device, n, generator):
        floor_ms = timer(floor, reps)
        secure_ms = timer(secure, reps)
        fast_ms = timer(fast, reps) if fast is not None else math.nan
        row = {
            "task": task,
            "floor ms": round(floor_ms, 3),
            "secure ÷ floor": round(secure_ms / floor_ms, 2),
            "fast ÷ floor": round(fast_ms / floor_ms, 2) if fast is not None else None,
        }
        rows.append(row)
        print(
            f"  {task:30s} floor {floor_ms:9.3f} ms  secure {secure_ms:9.3f} ms  fast {fast_ms:9.3f} ms"
        )
    return rows


def _graph_layout_rows(
    adjacency: Any, rr: Any, generator: Any, reps: int, timer: Any
) -> list[dict[str, Any]]:
    """``rr.randomize_graph`` in its four layouts (dense n×n, bit-packed rows, the upper
    triangle's coordinates, compressed rows), secure and fast; with CUDA, each call's peak device memory beyond
    what was allocated before it (the adjacency), the figure the packed layout exists for."""
    import torch

    cuda = adjacency.device.type == "cuda"
    n = int(adjacency.shape[0])
    rows = []
    print(
        f"randomize_graph layouts, {n} x {n} ({'peak memory beyond the input' if cuda else 'host path'})"
    )
    for output in ("dense", "packed", "coo", "csr"):
        for mode, rng in (("secure", None), ("fast", generator)):
            ms = timer(
                lambda rng=rng, output=output: rr.randomize_graph(
                    adjacency, rng=rng, output=output
                ),
                reps,
            )
            row: dict[str, Any] = {"layout": output, "mode": mode, "ms": round(ms, 3)}
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
                before = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
                result = rr.randomize_graph(adjacency, rng=rng, output=output)
                torch.cuda.synchronize()
                row["peak MB"] = round((torch.cuda.max_memory_allocated() - before) / 2**20, 1)
                del result
            rows.append(row)
            peak = f"  peak {row['peak MB']:10.1f} MB" if cuda else ""
            print(f"  {output:6s} {mode:6s} {ms:10.3f} ms{peak}")
    # The same key gives the same graph in every layout (checked on the first and last rows).
    key = bytes(range(32))
    dense = rr.randomize_graph(adjacency, rng=dpkit.SecureRandom.from_key(key))
    packed = rr.randomize_graph(adjacency, rng=dpkit.SecureRandom.from_key(key), output="packed")
    edge = min(n, 64)
    for part in (slice(0, edge), slice(n - edge, n)):
        unpacked = np.unpackbits(packed[part].cpu().numpy(), axis=1, count=n)
        assert np.array_equal(unpacked, dense[part].cpu().numpy() != 0), "packed ≠ dense"
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=32768)
    parser.add_argument("--cpu-nodes", type=int, default=8192)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument(
        "--values",
        type=int,
        default=100_000_000,
        help="values per task (table 2; a tenth for wide reports)",
    )
    parser.add_argument("--results", type=Path, help="publish into this results.json (gpu)")
    parser.add_argument(
        "--smoke-cpu",
        action="store_true",
        help="run the second table's code on the CPU (host paths; nothing published)",
    )
    args = parser.parse_args()

    import torch

    if args.smoke_cpu:
        _mechanism_rows(torch.device("cpu"), args.values, args.reps, _cpu_time)
        upper = torch.triu(
            torch.rand(512, 512, generator=torch.Generator().manual_seed(1)) < 0.01, 1
        )
        rr = dpkit.mechanism("rr", epsilon=args.epsilon)
        _graph_layout_rows(
            (upper | upper.T).to(torch.uint8),
            rr,
            torch.Generator().manual_seed(2),
            args.reps,
            _cpu_time,
        )
        return 0
    if not torch.cuda.is_available():
        print("bench_gpu: no CUDA device here; nothing measured", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    name = torch.cuda.get_device_name(device)
    n, eps = args.nodes, args.epsilon
    rr = dpkit.mechanism("rr", epsilon=eps)
    flip = rr.flip_probability
    generator = torch.Generator(device=device).manual_seed(1)
    upper = torch.triu(torch.rand(n, n, device=device, generator=generator) < 0.01, 1)
    adjacency = (upper | upper.T).to(torch.uint8)
    del upper
    entries = n * n
    print(f"{name}; rr, eps={eps}, adjacency {n} x {n} = {entries:.3g} entries (uint8)")

    kernel = _floor_kernel()
    out = torch.empty_like(adjacency)
    block = 1024

    def floor() -> None:
        grid = (-(-entries // (4 * block)),)
        kernel[grid](adjacency, out, entries, 12345, flip, BLOCK=block)

    contenders = {
        "copy": lambda: adjacency.clone(),
        "fused floor (Philox, 4 uniforms per call)": floor,
        "torch ops: x ^ (rand < p)": lambda: (
            adjacency ^ (torch.rand(adjacency.shape, device=device) < flip).to(torch.uint8)
        ),
        "seed matrix_randomized_response": lambda: seed_matrix_randomized_response(adjacency, eps),
        "dpkit randomize, secure": lambda: rr.randomize(adjacency),
        "dpkit randomize_graph, secure": lambda: rr.randomize_graph(adjacency),
        "dpkit randomize, fast": lambda: rr.randomize(adjacency, rng=generator),
        "dpkit randomize_graph, fast": lambda: rr.randomize_graph(adjacency, rng=generator),
    }
    rows = []
    times = {label: _cuda_time(fn, args.reps) for label, fn in contenders.items()}
    floor_ms = times["fused floor (Philox, 4 uniforms per call)"]
    for label, ms in times.items():
        rows.append({"contender": label, "ms": round(ms, 3), "÷ floor": round(ms / floor_ms, 2)})
    # Law check on the device, both modes: the flip rate of the upper triangle.
    for mode, rng in (("secure", None), ("fast", generator)):
        noisy = rr.randomize_graph(adjacency, rng=rng)
        flipped = int((noisy != adjacency).sum().item()) // 2
        pairs = n * (n - 1) // 2
        rate = flipped / pairs
        sd = math.sqrt(flip * (1 - flip) / pairs)
        print(
            f"  flip rate {mode}: {rate:.6f} (1/(1+e^eps) = {flip:.6f}, {abs(rate - flip) / sd:.1f} sd)"
        )
        symmetric = bool(torch.equal(noisy, noisy.T))
        print(f"  {mode}: symmetric {symmetric}, diagonal zero {int(noisy.diagonal().sum()) == 0}")

    m = args.cpu_nodes
    host = (np.random.default_rng(2).random((m, m)) < 0.01).astype(np.uint8)
    cpu_ms = _cpu_time(lambda: rr.randomize(host), max(2, args.reps // 3))
    tensor_ms = _cpu_time(lambda: rr.randomize(torch.from_numpy(host)), max(2, args.reps // 3))
    scaled = cpu_ms * entries / (m * m)
    rows.append(
        {
            "contender": f"dpkit randomize, secure, numpy on the CPU ({m}²; per entry × {n}²)",
            "ms": round(scaled, 1),
            "÷ floor": round(scaled / floor_ms, 1),
        }
    )
    print(
        f"  CPU, {m} x {m}: numpy {cpu_ms:.1f} ms, torch CPU tensor {tensor_ms:.1f} ms "
        f"({tensor_ms / cpu_ms:.2f}x)"
    )
    width = max(len(r["contender"]) for r in rows)
    for row in rows:
        print(f"{row['contender']:{width}s} {row['ms']:10.3f} ms {row['÷ floor']:8.2f}")
    layout_rows = _graph_layout_rows(adjacency, rr, generator, args.reps, _cuda_time)
    mechanism_rows = _mechanism_rows(device, args.values, args.reps, _cuda_time)
    figures = {
        "device": name,
        "torch": torch.__version__,
        "nodes": n,
        "epsilon": eps,
        "rows": rows,
        "cpu_tensor_over_numpy": round(tensor_ms / cpu_ms, 3),
        "values": args.values,
        "mechanism_rows": mechanism_rows,
        "graph_layout_rows": layout_rows,
    }
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    if args.results:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _results import Run

        run = Run("gpu", "python benchmarks/bench_gpu.py", harness={"reps": args.reps})
        run.save(
            title=f"Randomized response on a GPU ({name}), n = {n} adjacency, ε = {eps}",
            columns=["contender", "ms", "÷ floor"],
            rows=rows,
            notes=[
                "CUDA-event medians after two warm-up calls; dpkit calls include their host sync.",
                f"torch CPU tensor ÷ numpy array through dpkit on the CPU ({m}²): "
                f"{tensor_ms / cpu_ms:.2f}",
            ],
            path=args.results,
        )
        Run("gpu_mechanisms", "python benchmarks/bench_gpu.py", harness={"reps": args.reps}).save(
            title=f"Device paths on a GPU ({name}), {args.values:.3g} values per task",
            columns=["task", "floor ms", "secure ÷ floor", "fast ÷ floor"],
            rows=mechanism_rows,
            notes=[
                "CUDA-event medians after two warm-up calls; the floor is plain torch code for "
                "the same task (Philox, no exactness); dpkit calls include their host syncs."
            ],
            path=args.results,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
