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
* dpkit's numpy path on the CPU, on a smaller matrix (``--cpu-nodes``), scaled per entry;
* a torch CPU tensor against a numpy array of the same size through dpkit (same numpy path).

Times are CUDA-event medians of ``--reps`` calls after two warm-up calls (Triton compiles in
the first); each dpkit call includes its host synchronisation (the 0/1 check's flag).
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=32768)
    parser.add_argument("--cpu-nodes", type=int, default=8192)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument("--results", type=Path, help="publish into this results.json (gpu)")
    args = parser.parse_args()

    import torch

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
    figures = {
        "device": name,
        "torch": torch.__version__,
        "nodes": n,
        "epsilon": eps,
        "rows": rows,
        "cpu_tensor_over_numpy": round(tensor_ms / cpu_ms, 3),
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
