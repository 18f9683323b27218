"""Graph statistics under edge LDP: accuracy of one- and two-round triangles and of 2-stars on a
Barabási–Albert graph, time and peak memory in secure mode, and the sparse path at 10⁶ nodes.

    nice .venv/bin/python benchmarks/bench_graph.py            # 10⁵-node BA graph, 10⁶ sparse
    nice .venv/bin/python benchmarks/bench_graph.py --nodes 20000 --big 200000 --no-save

Accuracy (section ``graph``): the relative error sd/true of each estimator at ε ∈ {0.5, 1, 2}.

* One round (randomized response on the lower triangle, ``graph_rr``) cannot be *run* at 10⁵
  nodes — its noisy graph has ~n²/2·p₀ edges (10⁹ at ε = 1) and its estimator needs O(n³)
  time — so its error is the exact standard deviation from the variance formula of
  :mod:`dpkit_ldp.graph_estimators` evaluated on the true graph (N_t from the exact edge,
  2-star and triangle counts; Σ_e v_{a_e} c_e(c_e − 1) from the sparse A²). The formula is the
  one the unit tests check exactly by enumeration.
* Two rounds (``TwoRoundTriangles``, ε₁ = ε₂ = ε/2, D the largest lower degree, i.e. an exact
  public bound): with randomized response in round 1, the exact standard deviation from its
  variance formula on the true graph (the noisy graph is dense: not run); with asymmetric RR
  whose μ reports about ``--noise-pairs`` non-edges (a sparse noisy graph), the exact standard
  deviation *and* the root-mean-square error of ``--reps`` real runs in fast mode.
* 2-stars: LocalLap (``graph_kstar``, D = the largest degree): exact sd = √(n·Var Z).

The papers' settings (section ``graph_papers``): Imola, Murakami & Chaudhuri 2021 publish their
results with their code (github.com/LDPGraphStatistics/LDPGraphStatistics,
``results/BAGraph/res2_eps_loss.xlsx``): on a Barabási–Albert graph of 10⁶ nodes (m = 10 and
50, networkx's generator), each of 10 runs draws n = 10,000 nodes at random and releases the
statistics of the graph they induce, with the true maximum degree d_max as the noise's bound
("NSType 1"), ε split equally between the two rounds ("Balloc 1-1-1"), and reports the mean of
|f̂ − f| / max(f, 0.001·n). The same protocol here: the same kind of graph (this package's
generator, another draw), the same subsets and metric, dpkit's estimators: real runs for
2-stars; for triangles — whose first round is a dense noisy graph of 5·10⁷ pairs, about 26 s
a run here, and whose one-round count takes O(n³) — the exact standard deviation on each
subset (the variance formulas the unit tests check by enumeration) times √(2/π), the mean
absolute value of a normal error. dpkit's noise bound is the largest degree too (its two-round
sensitivity is D − 1 where the paper adds Laplace noise of scale d_max/ε₂; LocalLap's is
C(D − 1, 1) where the paper uses d_max), so dpkit's errors may be slightly smaller.

The 2022 paper's code (section ``graph_paper_code``, only with ``--paper-binary PATH``):
Imola, Murakami & Chaudhuri 2022 report on Gplus and IMDB only, which cannot be downloaded
here, and publish no result files, but their code (github.com/TriangleLDP/TriangleLDP, MIT;
build: docs/benchmarks.md) runs on any graph in its format. Its ARRFull ("alg" 2) with the
bound d_max ("NSType 0") is the algorithm of ``graph_triangles`` with ``round_one="graph_arr"``.
In the setting of their ``run_TriangleCounting.sh`` — n = 10,000 users drawn at random from
the graph (Gplus: 107,614 nodes), one subset for all runs ("#itr-1"), ε split equally — on a
Barabási–Albert graph of ``--paper-code-graph`` nodes (m = ``--paper-code-m``, this package's
generator), both codes run on the *same* subset (the node order is handed to their code in the
file it reads when present), at ε ∈ {0.5, 1, 2} and μ ∈ {10⁻³ (their script's), 10⁻¹}:
their binary with no triangle clipping ("-1") and with their script's clip argument ("0"),
dpkit's protocol with D = the subset's largest lower degree (the d_max their code uses), each
``--paper-code-runs`` times; the mean of |T̂ − T| / max(T, 0.001·n) (their measure), and the
expected value of both algorithms, √(2/π)·sd / max(T, 0.001·n) with the exact sd on the subset
(their noise Lap(d_max/ε₂), dpkit's of sensitivity D − 1). Their code seeds its generators
with constants, so every setting reuses the same draws: its column is one sample of
``--paper-code-runs`` runs, rescaled.

Time and memory (section ``graph_time``): one secure-mode release of every mechanism on the
BA graph and of asymmetric RR (sparse) on a 10⁶-node G(n, p) graph, CPU seconds and the peak
traced allocation (``tracemalloc``, which numpy reports to).
"""

from __future__ import annotations

import argparse
import math
import subprocess
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
from dpkit_ldp import barabasi_albert, erdos_renyi, graph_counts
from dpkit_ldp.graph_arr import AsymmetricRandomizedResponse
from dpkit_ldp.graph_triangles import TwoRoundTriangles, projected_lower

import dpkit

EPSILONS = (0.5, 1.0, 2.0)


def _sparse(graph: Any) -> Any:
    from scipy import sparse

    rows = graph.rows()
    return sparse.csr_matrix(
        (np.ones(rows.size), (rows, graph.indices)), shape=(graph.nodes, graph.nodes)
    )


def one_round_sd(graph: Any, counts: Any, epsilon: float) -> float:
    """√Var T̂ of one-round randomized response, exactly, on the true graph."""
    n = graph.nodes
    p1 = 1.0 / (1.0 + math.exp(-epsilon))
    p0 = 1.0 - p1
    v = p0 * p1 / (p1 - p0) ** 2
    s1, s2, s3 = (n - 2) * counts.edges, counts.kstars(2), counts.triangles
    n3, n2, n1 = s3, s2 - 3 * s3, s1 - 2 * s2 + 3 * s3
    n0 = math.comb(n, 3) - s1 + s2 - s3
    base = sum(c * (1 + v) ** t * v ** (3 - t) for t, c in enumerate((n0, n1, n2, n3))) - n3
    a = _sparse(graph)
    total = 0.0
    for start in range(0, n, 2000):  # blocks of rows of A²: memory bounded by a block
        block = (a[start : start + 2000] @ a).tocoo()
        off = block.row + start != block.col
        c = block.data[off]
        total += float(np.sum(c * (c - 1)))
    return math.sqrt(base + v * total / 2.0)


def two_round_sd(
    graph: Any, protocol: TwoRoundTriangles, noise_variance: float | None = None
) -> float:
    """√Var T̂ of the two-round protocol, exactly, on the true graph (projection included);
    ``noise_variance``: one user's round-2 noise variance instead of the protocol's."""
    from scipy import sparse

    offsets, neighbours = projected_lower(graph, protocol.max_degree)
    users = np.repeat(np.arange(graph.nodes), np.diff(offsets))
    kept = sparse.csr_matrix(
        (np.ones(users.size), (users, neighbours)), shape=(graph.nodes, graph.nodes)
    )
    w = (kept.T @ kept).tocoo()  # W_jk for j ≠ k, both orders
    upper = w.row < w.col
    j, k, counts = w.row[upper], w.col[upper], w.data[upper]
    a = _sparse(graph)
    edge = np.asarray(a[j, k]).ravel() > 0
    p1, p0 = protocol.first_mechanism.channel
    variance_bits = np.where(edge, p1 * (1 - p1), p0 * (1 - p0))
    wedge = float(np.sum(counts**2 * variance_bits))
    noise = graph.nodes * (protocol.noise_variance if noise_variance is None else noise_variance)
    return math.sqrt((wedge + noise) / (p1 - p0) ** 2)


def mu_for(pairs: int, reported: float, epsilon: float) -> float:
    """The μ at which asymmetric RR reports about ``reported`` non-edges of ``pairs``."""
    return min(
        AsymmetricRandomizedResponse.largest_mu(epsilon), reported / pairs * math.exp(epsilon)
    )


def accuracy(graph: Any, counts: Any, reps: int, noise_pairs: float) -> list[dict[str, Any]]:
    rows = []
    rng = np.random.default_rng(20261127)
    lower_bound = int(graph.lower_degrees().max())
    for epsilon in EPSILONS:
        half = epsilon / 2
        protocol = TwoRoundTriangles(
            epsilon1=half,
            epsilon2=half,
            nodes=graph.nodes,
            max_degree=lower_bound,
            round_one="graph_arr",
            mu=mu_for(graph.pairs, noise_pairs, half),
        )
        sd1 = one_round_sd(graph, counts, epsilon)
        rr_protocol = TwoRoundTriangles(
            epsilon1=half, epsilon2=half, nodes=graph.nodes, max_degree=lower_bound
        )
        sd_rr = two_round_sd(graph, rr_protocol)
        sd2 = two_round_sd(graph, protocol)
        errors = []
        for _ in range(reps):
            reports = protocol.randomize_graph(graph, rng=rng)
            errors.append(dpkit.graph.triangles(protocol, reports).value - counts.triangles)
        rms = math.sqrt(float(np.mean(np.square(errors))))
        kstar = dpkit.mechanism(
            "graph_kstar", epsilon=epsilon, nodes=graph.nodes, max_degree=int(counts.degrees.max())
        )
        sd_stars = math.sqrt(graph.nodes * kstar.noise_variance)
        row = {
            "ε": epsilon,
            "triangles, one round (exact sd)": sd1 / counts.triangles,
            "triangles, two rounds RR (exact sd)": sd_rr / counts.triangles,
            "two rounds ARR (exact sd)": sd2 / counts.triangles,
            f"two rounds ARR, rms of {reps} runs": rms / counts.triangles,
            "2-stars, LocalLap (exact sd)": sd_stars / counts.kstars(2),
        }
        print("  ".join(f"{k}: {v:.4g}" for k, v in row.items()))
        rows.append(row)
    return rows


#: The paper's mean relative errors at ε (Imola, Murakami & Chaudhuri 2021; the authors'
#: ``results/BAGraph/res2_eps_loss.xlsx``, sheets "tri (RR, m=…)", "tri (2-rounds, m=…)" and
#: "st2 (local, m=…)", column re_avg; n = 10,000, itr = 10, ns = 1, ba = 1-1-1).
PAPER_2021: dict[tuple[int, str], dict[float, float]] = {
    (10, "triangles, one round"): {0.2: 4594177, 0.4: 766681, 1.0: 21857.26, 2.0: 2655.991},
    (10, "triangles, two rounds"): {0.2: 65231.99, 0.4: 16348.09, 1.0: 2661.104, 2.0: 705.6416},
    (10, "2-stars, LocalLap"): {0.2: 13.95279, 0.4: 6.976393, 1.0: 2.790557, 2.0: 1.395279},
    (50, "triangles, one round"): {0.2: 3451310, 0.4: 572059.4, 1.0: 38276.14, 2.0: 3280.112},
    (50, "triangles, two rounds"): {0.2: 199938.2, 0.4: 50108.71, 1.0: 8161.926, 2.0: 2162.543},
    (50, "2-stars, LocalLap"): {0.2: 2.520185, 0.4: 1.260092, 1.0: 0.5040369, 2.0: 0.2520185},
}
PAPER_USERS = 10_000
PAPER_RUNS = 10


def induced(graph: Any, nodes: Any) -> Any:
    """The subgraph ``nodes`` induce, relabelled 0 .. len(nodes) − 1 in the given order."""
    from dpkit_ldp.graphs import Graph

    label = np.full(graph.nodes, -1, dtype=np.int64)
    label[nodes] = np.arange(nodes.size)
    rows, cols = graph.lower()
    keep = (label[rows] >= 0) & (label[cols] >= 0)
    return Graph.from_lower(nodes.size, label[rows[keep]], label[cols[keep]])


def papers(big_nodes: int, ms: tuple[int, ...]) -> list[dict[str, Any]]:
    """The paper's relative errors beside dpkit's in the same setting (module docstring)."""
    rows = []
    rng = np.random.default_rng(2021)
    for m in ms:
        graph = barabasi_albert(big_nodes, m, rng=rng)
        errors: dict[tuple[str, float], list[float]] = {}
        for _ in range(PAPER_RUNS):
            sample = induced(graph, rng.permutation(graph.nodes)[:PAPER_USERS])
            counts = graph_counts(sample)
            d_max = max(int(counts.degrees.max()), 2)
            floor = 0.001 * sample.nodes
            for epsilon in sorted({e for table in PAPER_2021.values() for e in table}):
                triangles_floor = max(counts.triangles, floor)
                sd = one_round_sd(sample, counts, epsilon)
                errors.setdefault(("triangles, one round", epsilon), []).append(
                    sd * math.sqrt(2 / math.pi) / triangles_floor
                )
                protocol = TwoRoundTriangles(
                    epsilon1=epsilon / 2, epsilon2=epsilon / 2, nodes=sample.nodes, max_degree=d_max
                )
                errors.setdefault(("triangles, two rounds", epsilon), []).append(
                    two_round_sd(sample, protocol) * math.sqrt(2 / math.pi) / triangles_floor
                )
                kstar = dpkit.mechanism(
                    "graph_kstar", epsilon=epsilon, nodes=sample.nodes, max_degree=d_max
                )
                stars = dpkit.graph.kstars(kstar, kstar.randomize_graph(sample, rng=rng))
                errors.setdefault(("2-stars, LocalLap", epsilon), []).append(
                    abs(stars.value - counts.kstars(2)) / max(counts.kstars(2), floor)
                )
        for (statistic, epsilon), found in sorted(errors.items()):
            paper = PAPER_2021[(m, statistic)][epsilon]
            dpkit_error = float(np.mean(found))
            row = {
                "setting": f"{statistic}, m = {m}",
                "ε": epsilon,
                "paper": paper,
                "dpkit": dpkit_error,
                "dpkit / paper": dpkit_error / paper,
            }
            print(
                "  ".join(
                    f"{k}: {v:.4g}" if isinstance(v, float) else f"{k}: {v}" for k, v in row.items()
                )
            )
            rows.append(row)
    return rows


#: Imola, Murakami & Chaudhuri 2022 publish their code, not their results
#: (github.com/TriangleLDP/TriangleLDP, ``cpp/TriangleCounting.cpp``): their ARRFull
#: (``alg`` 2) runs here beside dpkit's two-round protocol with asymmetric RR in round 1, on the
#: same subset (module docstring).
PAPER_CODE_USERS = 10_000
PAPER_CODE_EPSILONS = (0.5, 1.0, 2.0)
#: μ = 10⁻³ is the value their ``run_TriangleCounting.sh`` passes ("1-0.001"); 10⁻¹ is a second,
#: less sparse setting.
PAPER_CODE_MUS = (0.001, 0.1)


def write_paper_input(graph: Any, directory: Path, order: Any, runs: int) -> Path:
    """The 2022 code's input in ``directory``: ``edges.csv`` as its ``python/ReadGPlus.py``
    writes it ("#nodes", n, "node,node", then "i,j" with i < j per edge), ``deg.csv``, and the
    node order of its runs, ``node-order_itr{runs}.csv`` (line j: "j,o,…,o,", node j kept when
    o < the users, relabelled o) — a file the code reads, when it exists, instead of drawing
    its own: both codes see the same subset."""
    rows, cols = graph.lower()  # rows > cols
    edges = directory / "edges.csv"
    with edges.open("w") as out:
        out.write(f"#nodes\n{graph.nodes}\nnode,node\n")
        for start in range(0, rows.size, chunk := 1 << 20):
            pairs = zip(
                cols[start : start + chunk].tolist(),
                rows[start : start + chunk].tolist(),
                strict=True,
            )
            out.write("".join(f"{j},{i}\n" for j, i in pairs))
    degrees = np.bincount(np.concatenate([rows, cols]), minlength=graph.nodes)
    (directory / "deg.csv").write_text(
        "node,deg\n" + "".join(f"{v},{d}\n" for v, d in enumerate(degrees.tolist()))
    )
    (directory / f"node-order_itr{runs}.csv").write_text(
        "".join(f"{j}," + f"{o}," * runs + "\n" for j, o in enumerate(np.asarray(order).tolist()))
    )
    return edges


def run_paper_code(
    binary: Path, edges: Path, runs: int, epsilon: float, mu: float, clip: str
) -> dict[str, list[float]]:
    """Their ARRFull with the noise bound d_max ("NSType 0") on one subset (their script's
    "#itr-1"): ``TriangleCounting edges.csv n ε-μ 0 clip runs-1 2``; each run's true count,
    relative error and noise bound, from its output file."""
    for old in edges.parent.glob("res_*.csv"):
        old.unlink()
    arguments = [str(PAPER_CODE_USERS), f"{epsilon:g}-{mu:g}", "0", clip, f"{runs}-1", "2"]
    subprocess.run(
        [str(binary), str(edges), *arguments], check=True, capture_output=True, cwd=edges.parent
    )
    (result,) = edges.parent.glob("res_*.csv")
    fields = [line.split(",") for line in result.read_text().splitlines()[1 : 1 + runs]]
    return {
        "true": [float(f[0]) for f in fields],
        "error": [float(f[2]) for f in fields],
        "bound": [float(f[16]) for f in fields],
    }


def paper_code(binary: Path | None, graph_nodes: int, m: int, runs: int) -> list[dict[str, Any]]:
    """The 2022 paper's code and dpkit on the same subset of one BA graph (module docstring)."""
    if binary is None:
        print("graph_paper_code: skipped (no --paper-binary: their compiled TriangleCounting)")
        return []
    rng = np.random.default_rng(2022)
    graph = barabasi_albert(graph_nodes, m, rng=rng)
    order = rng.permutation(graph_nodes)
    sample = induced(graph, np.argsort(order)[:PAPER_CODE_USERS])
    triangles = graph_counts(sample).triangles
    bound = max(int(sample.lower_degrees().max()), 2)
    floor = max(triangles, 0.001 * sample.nodes)
    print(f"BA({graph_nodes}, {m}), subset of {sample.nodes}: {triangles} triangles, D = {bound}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="dpkit-triangleldp-") as directory:
        edges = write_paper_input(graph, Path(directory), order, runs)
        for mu in PAPER_CODE_MUS:
            for epsilon in PAPER_CODE_EPSILONS:
                start = time.perf_counter()
                theirs = run_paper_code(binary, edges, runs, epsilon, mu, "-1")
                their_seconds = time.perf_counter() - start
                clipped = run_paper_code(binary, edges, runs, epsilon, mu, "0")
                assert set(theirs["true"]) == {triangles}, "the two codes' subsets differ"
                assert set(theirs["bound"]) == {bound}, "the two codes' noise bounds differ"
                protocol = TwoRoundTriangles(
                    epsilon1=epsilon / 2,
                    epsilon2=epsilon / 2,
                    nodes=sample.nodes,
                    max_degree=bound,
                    round_one="graph_arr",
                    mu=mu,
                )
                start = time.perf_counter()
                ours = [
                    abs(
                        dpkit.graph.triangles(
                            protocol, protocol.randomize_graph(sample, rng=rng)
                        ).value
                        - triangles
                    )
                    / floor
                    for _ in range(runs)
                ]
                our_seconds = time.perf_counter() - start
                laplace = 2 * (bound / (epsilon / 2)) ** 2  # their noise: Lap(d_max/ε₂)
                mean_abs = math.sqrt(2 / math.pi) / floor
                row = {
                    "μ": mu,
                    "ε": epsilon,
                    "paper's code": float(np.mean(theirs["error"])),
                    "dpkit": float(np.mean(ours)),
                    "dpkit / paper's code": float(np.mean(ours) / np.mean(theirs["error"])),
                    "expected, paper": two_round_sd(sample, protocol, laplace) * mean_abs,
                    "expected, dpkit": two_round_sd(sample, protocol) * mean_abs,
                    "paper's code, clip argument 0": float(np.mean(clipped["error"])),
                    "paper's code s": round(their_seconds, 2),
                    "dpkit s": round(our_seconds, 2),
                }
                print("  ".join(f"{k}: {v:.4g}" for k, v in row.items()))
                rows.append(row)
    return rows


def save_paper_code(run: Any, args: Any, rows: list[dict[str, Any]]) -> None:
    """Section ``graph_paper_code`` of results.json."""
    command = (
        "python benchmarks/bench_graph.py --only-paper-code --paper-binary TriangleCounting"
        f" --paper-code-graph {args.paper_code_graph} --paper-code-m {args.paper_code_m}"
        f" --paper-code-runs {args.paper_code_runs}"
    )
    run(
        "graph_paper_code",
        command,
        harness={
            "graph": args.paper_code_graph,
            "m": args.paper_code_m,
            "users": PAPER_CODE_USERS,
            "runs": args.paper_code_runs,
        },
    ).save(
        title=(
            "Mean relative error |T̂ − T| / max(T, 0.001·n) of two-round triangle counting "
            "with asymmetric RR (Imola et al. 2022's ARRFull, noise bound d_max): their code "
            f"and dpkit, {args.paper_code_runs} runs each on the same subset of "
            f"n = {PAPER_CODE_USERS:,} nodes of a BA graph ({args.paper_code_graph:,} nodes, "
            f"m = {args.paper_code_m})"
        ),
        columns=list(rows[0]),
        rows=rows,
        notes=[
            "paper's code: github.com/TriangleLDP/TriangleLDP, cpp/TriangleCounting.cpp, run as "
            f"TriangleCounting edges.csv 10000 ε-μ 0 -1 {args.paper_code_runs}-1 2 (ARRFull, "
            "Laplace noise of scale d_max/ε₂ with d_max the subset's largest lower degree, no "
            "clipping, ε₁ = ε₂ = ε/2, one subset for all runs as in their script)",
            "dpkit: graph_triangles, round_one='graph_arr', the same μ, ε₁ = ε₂ = ε/2, D = the "
            "subset's largest lower degree (no projection; sensitivity D − 1), real runs in "
            "fast mode",
            "expected: √(2/π)·sd / max(T, 0.001·n), the mean absolute error of a normal with "
            "each algorithm's exact sd on the subset (their noise Lap(d_max/ε₂), dpkit's)",
            "their code seeds its generators with constants: every setting reuses the same "
            "draws, so its column is one sample of the runs, rescaled (its ratio to the "
            "expected value is the same in every row)",
            "clip argument 0: the argument their script passes for its d_max runs; it clips "
            "each edge's noisy triangle count at μ·d_i (docs/benchmarks.md)",
            "each measured figure is a mean over the runs, itself noisy; times are wall "
            "seconds of all runs of one setting (theirs: the binary's, which reads the edge "
            "file once per run)",
        ],
    )


def timed(label: str, call: Any) -> dict[str, Any]:
    tracemalloc.start()
    start = time.process_time()
    call()
    cpu = time.process_time() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"{label:60s} {cpu:8.2f} s  {peak / 2**20:9.1f} MiB")
    return {
        "release (secure mode)": label,
        "cpu s": round(cpu, 2),
        "peak MiB": round(peak / 2**20, 1),
    }


def timings(graph: Any, big: Any, counts: Any) -> list[dict[str, Any]]:
    n = graph.nodes
    bound = int(graph.lower_degrees().max())
    mu = mu_for(graph.pairs, 5e6, 1.0)
    arr = dpkit.mechanism("graph_arr", epsilon=1.0, nodes=n, mu=mu, output="sparse")
    protocol = TwoRoundTriangles(
        epsilon1=0.5,
        epsilon2=0.5,
        nodes=n,
        max_degree=bound,
        round_one="graph_arr",
        mu=mu_for(graph.pairs, 5e6, 0.5),
    )
    rows = [
        timed(
            f"graph_degree, {n} nodes",
            lambda: dpkit.mechanism("graph_degree", epsilon=1.0, nodes=n).randomize_graph(graph),
        ),
        timed(
            f"graph_kstar k=2, {n} nodes",
            lambda: dpkit.mechanism(
                "graph_kstar", epsilon=1.0, nodes=n, max_degree=int(counts.degrees.max())
            ).randomize_graph(graph),
        ),
        timed(
            f"graph_arr μ={mu:.2g} sparse (~5·10⁶ noise pairs), {n} nodes",
            lambda: arr.randomize_graph(graph),
        ),
        timed(
            f"two rounds (arr, ~5·10⁶ noise pairs), {n} nodes",
            lambda: protocol.randomize_graph(graph),
        ),
    ]
    big_mu = mu_for(big.pairs, 1e7, 1.0)
    big_arr = dpkit.mechanism("graph_arr", epsilon=1.0, nodes=big.nodes, mu=big_mu, output="sparse")
    holder: dict[str, Any] = {}
    rows.append(
        timed(
            f"graph_arr μ={big_mu:.2g} sparse (~10⁷ noise pairs), {big.nodes} nodes",
            lambda: holder.setdefault("reports", big_arr.randomize_graph(big)),
        )
    )
    edges = dpkit.graph.edge_count(big_arr, holder["reports"])
    print(
        f"  {holder['reports'].ones()} reported pairs; edges {edges.value:.0f} ± "
        f"{float(edges.standard_error):.0f} (true {big.edges})"
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--m", type=int, default=10, help="edges per new BA node")
    parser.add_argument("--big", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument(
        "--noise-pairs", type=float, default=1e7, help="round-1 ARR: expected reported non-edges"
    )
    parser.add_argument(
        "--paper-graph", type=int, default=1_000_000, help="nodes of the papers' BA graph"
    )
    parser.add_argument(
        "--paper-m", type=int, nargs="*", default=[10, 50], help="the papers' m (10, 50)"
    )
    parser.add_argument("--only-papers", action="store_true")
    parser.add_argument(
        "--paper-binary",
        type=Path,
        help="the 2022 paper's compiled TriangleCounting (section graph_paper_code; docs)",
    )
    parser.add_argument(
        "--paper-code-graph", type=int, default=100_000, help="nodes of graph_paper_code's BA graph"
    )
    parser.add_argument("--paper-code-m", type=int, default=50, help="graph_paper_code's BA m")
    parser.add_argument("--paper-code-runs", type=int, default=10, help="subsets (their #itr)")
    parser.add_argument("--only-paper-code", action="store_true")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    from _results import Run

    code_rows = paper_code(
        args.paper_binary, args.paper_code_graph, args.paper_code_m, args.paper_code_runs
    )
    if code_rows and not args.no_save:
        save_paper_code(Run, args, code_rows)
    if args.only_paper_code:
        return
    command = "python benchmarks/bench_graph.py" + (" --only-papers" if args.only_papers else "")
    paper_rows = papers(args.paper_graph, tuple(args.paper_m))
    if not args.no_save:
        Run(
            "graph_papers",
            command,
            harness={"graph": args.paper_graph, "users": PAPER_USERS, "runs": PAPER_RUNS},
        ).save(
            title=(
                "Mean relative error |f̂ − f| / max(f, 0.001·n) in Imola et al. 2021's setting "
                f"(n = {PAPER_USERS:,} nodes drawn from a BA graph of {args.paper_graph:,}, "
                f"{PAPER_RUNS} runs): the paper's published figures and dpkit's"
            ),
            columns=list(paper_rows[0]),
            rows=paper_rows,
            notes=[
                "paper: the authors' results/BAGraph/res2_eps_loss.xlsx (re_avg), "
                "github.com/LDPGraphStatistics/LDPGraphStatistics",
                "dpkit, triangles: the exact sd on each subset × √(2/π), the mean absolute "
                "normal error (a dense first round of 5·10⁷ pairs per run); 2-stars: real "
                "runs, fast mode",
                "a BA graph is another draw of the same model, not the paper's graph: a "
                "subset of 10⁴ of its 10⁶ nodes holds few triangles, so errors relative to "
                "max(f, 10) are large for every method",
            ],
        )
    if args.only_papers:
        return
    rng = np.random.default_rng(1)
    graph = barabasi_albert(args.nodes, args.m, rng=rng)
    counts = graph_counts(graph)
    print(
        f"BA({args.nodes}, {args.m}): {counts.edges} edges, {counts.triangles} triangles, "
        f"{counts.kstars(2)} 2-stars, max degree {int(counts.degrees.max())}"
    )
    rows = accuracy(graph, counts, args.reps, args.noise_pairs)
    big = erdos_renyi(args.big, 10.0 / args.big, rng=rng)
    time_rows = timings(graph, big, counts)
    if args.no_save:
        return
    Run("graph", command, harness={"nodes": args.nodes, "m": args.m, "reps": args.reps}).save(
        title=f"Relative error (sd / true) on a Barabási–Albert graph, n = {args.nodes}, m = {args.m}",
        columns=list(rows[0]),
        rows=rows,
        notes=[
            "one round: exact sd from the variance formula on the true graph (the protocol "
            "itself needs the dense noisy graph and O(n³) time at this n)",
            "two rounds: ε₁ = ε₂ = ε/2, D = the largest lower degree; RR in round 1 (exact sd "
            "only: its noisy graph is dense), or asymmetric RR with the μ that reports about "
            f"{args.noise_pairs:.0e} non-edges (exact sd, and real runs in fast mode)",
        ],
    )
    Run("graph_time", command, harness={"big": args.big}).save(
        title="One secure-mode release: CPU time and peak traced memory",
        columns=list(time_rows[0]),
        rows=time_rows,
        notes=["the last row is G(n, p) with mean degree 10"],
    )


if __name__ == "__main__":
    main()
