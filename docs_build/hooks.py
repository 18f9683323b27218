"""MkDocs hooks: the parts of the site that the library generates at build time.

* ``figures/*.png`` are drawn by :func:`dpkit.plot.docs_figures` into a temporary directory and
  added to the site as generated files (nothing is written into ``docs/``, nothing is committed);
* ``figures/benchmarks.png`` is drawn from the peer comparisons recorded in
  ``benchmarks/results.json``, and ``<!-- dpkit:benchmark NAME -->`` in a page is replaced by
  the table of section NAME of that file, with the command, date and machine load that
  produced it (:func:`benchmark_table`), so the benchmark page shows only measured figures;
* ``<!-- dpkit:schema KIND -->`` in a page is replaced by the reference tables of that spec
  schema (:func:`dpkit.spec.reference.schema_reference`), for the built-in plugins only, so the
  page does not depend on which third-party plugins the builder has installed;
* math (``$...$``, ``$$...$$``, turned into ``\\(...\\)`` and ``\\[...\\]`` inside
  ``arithmatex`` elements by ``pymdownx.arithmatex``) is rendered to MathML here, at build time,
  with ``latex2mathml``: browsers display MathML natively, so the site loads no script and needs
  no network to show its equations.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import dpkit_central
import dpkit_ldp
from latex2mathml.converter import convert as latex_to_mathml
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

from dpkit.plot import docs_figures
from dpkit.registry import load_registry
from dpkit.spec.reference import schema_reference

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9")  # Okabe–Ito: colour-blind safe
REPOSITORY = Path(__file__).resolve().parents[1]
SCHEMA_MARKER = re.compile(r"<!--\s*dpkit:schema\s+(query|session|result)\s*-->")
BENCHMARK_MARKER = re.compile(r"<!--\s*dpkit:benchmark\s+([A-Za-z0-9_]+)\s*-->")
RESULTS = REPOSITORY / "benchmarks" / "results.json"
_figures: Path | None = None
#: pymdownx.arithmatex's generic output: ``\\(...\\)`` in a span, ``\\[...\\]`` in a div.
ARITHMATEX = re.compile(
    r'<(?P<tag>span|div) class="arithmatex">\s*\\(?P<open>[(\[])(?P<tex>.*?)\\[)\]]\s*</(?P=tag)>',
    re.S,
)
#: ``\\[2ex]``: extra space after a line break, which latex2mathml would print as text.
LINE_BREAK_SPACING = re.compile(r"\\\\\[[^\]]*\]")
#: ``\\text{...}``, ``\\texttt{...}`` (no nested braces): where ``\\_`` means an underscore.
#: Operator names latex2mathml does not know (it would print the backslash): ``\\arg``.
UNKNOWN_OPERATOR = re.compile(r"\\(arg)(?![A-Za-z])")
TEXT_COMMAND = re.compile(r"(\\(?:text|texttt|textrm|textit|textbf|mathrm)\{)([^{}]*)(\})")


def on_pre_build(config: Any) -> None:
    global _figures
    if _figures is not None:
        shutil.rmtree(_figures, ignore_errors=True)
    _figures = Path(tempfile.mkdtemp(prefix="dpkit-docs-figures-"))
    docs_figures(_figures)
    benchmark_figure(RESULTS, _figures / "benchmarks.png")
    graph_figure(RESULTS, _figures / "graph_error.png")


def graph_figure(results: Path, out: Path) -> None:
    """Relative error against ε, log scale: each estimator of section ``graph`` (the exact
    standard deviations and the runs' root-mean-square error) as a line, and, beside them, the
    figures the papers report for their own settings (section ``graph_papers``, when there)."""
    from matplotlib.figure import Figure

    sections = json.loads(results.read_text(encoding="utf-8"))["sections"]
    section = sections["graph"]
    papers = sections.get("graph_papers")
    figure = Figure(figsize=(13 if papers else 6.5, 4.6), layout="constrained")
    axes = figure.add_subplot(1, 2 if papers else 1, 1)
    epsilons = [row["ε"] for row in section["rows"]]
    for colour, column in zip(
        PALETTE * 2, [c for c in section["columns"] if c != "ε"], strict=False
    ):
        runs = "rms" in column
        axes.plot(
            epsilons,
            [row[column] for row in section["rows"]],
            "o:" if runs else "o-",
            color=colour,
            label=column,
        )
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xticks(epsilons, [f"{e:g}" for e in epsilons])
    axes.set_xlabel("ε")
    axes.set_ylabel("relative error (sd / true count)")
    axes.set_title(
        section["title"].split(", n =")[0] + f", n = {section['harness']['nodes']:,}", fontsize=9
    )
    axes.legend(fontsize=7, frameon=False)
    axes.spines[["top", "right"]].set_visible(False)
    if papers:
        _papers_panel(figure.add_subplot(1, 2, 2), papers)
    figure.savefig(out, dpi=120)


def _papers_panel(axes: Any, section: dict[str, Any]) -> None:
    """The papers' reported relative errors (crosses, dashed) and dpkit's at the same settings
    (circles), one colour per setting."""
    colours = (*PALETTE, "#D55E00", "#000000", "#F0E442")  # the rest of Okabe–Ito
    settings = sorted({row["setting"] for row in section["rows"]})
    epsilons = sorted({row["ε"] for row in section["rows"]})
    for colour, setting in zip(colours, settings, strict=False):
        rows = [row for row in section["rows"] if row["setting"] == setting]
        x = [row["ε"] for row in rows]
        axes.plot(x, [row["paper"] for row in rows], "x--", color=colour, label=f"{setting}: paper")
        axes.plot(x, [row["dpkit"] for row in rows], "o-", color=colour, label=f"{setting}: dpkit")
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xticks(epsilons, [f"{e:g}" for e in epsilons])
    axes.set_xlabel("ε")
    axes.set_ylabel("mean |f̂ − f| / max(f, 0.001·n)")
    axes.set_title("Imola et al. 2021's setting: their figures (×) and dpkit's (●)", fontsize=9)
    axes.legend(fontsize=6, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    axes.spines[["top", "right"]].set_visible(False)


def benchmark_figure(results: Path, out: Path) -> None:
    """Horizontal bars: dpkit's speed-up over each peer, per task, on a log scale, with dpkit
    and the peer in the same mode (secure against secure, fast against fast)."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    sections = json.loads(results.read_text(encoding="utf-8"))["sections"]
    rows = [row for section in sections.values() for row in section.get("peers", [])]
    rows.sort(key=lambda row: (row["mode"] != "secure", row["task"], row["peer"]))
    modes = {"secure": PALETTE[0], "fast": PALETTE[1]}
    figure = Figure(figsize=(8.5, 0.36 * max(len(rows), 1) + 1.4), layout="constrained")
    axes = figure.add_subplot()
    labels = [f"{row['task']} — {row['peer']} ({row['mode']})" for row in rows]
    speedups = [row["speedup"] for row in rows]
    bars = axes.barh(labels, speedups, color=[modes[row["mode"]] for row in rows])
    axes.bar_label(bars, labels=[f"{s:,.0f}×" for s in speedups], padding=3, fontsize=8)
    axes.set_xscale("log")
    axes.set_xlim(1, max(speedups, default=10) * 4)
    axes.invert_yaxis()
    axes.tick_params(axis="y", labelsize=8)
    axes.set_xlabel("times faster than the peer (log scale)")
    axes.spines[["top", "right"]].set_visible(False)
    handles = [Patch(color=colour, label=f"{mode} vs {mode}") for mode, colour in modes.items()]
    axes.legend(handles=handles, loc="lower right", fontsize=8, frameon=False)
    figure.savefig(out, dpi=120)


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value).replace("|", "\\|")


def benchmark_table(name: str, results: Path = RESULTS) -> str:
    """Markdown for section ``name`` of results.json: its table, its peer comparisons, and where
    the figures come from (command, date, machine, load before and after the run)."""
    sections = json.loads(results.read_text(encoding="utf-8"))["sections"]
    if name not in sections:
        raise PluginError(f"benchmarks/results.json has no section {name!r}")
    section = sections[name]
    columns = section["columns"]
    lines = [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---" for _ in columns) + "|",
    ]
    lines += [
        "| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |" for row in section["rows"]
    ]
    if section.get("peers"):
        lines += ["", "| task | peer | mode | dpkit is faster (CPU) |", "|---|---|---|---|"]
        lines += [
            f"| {p['task']} | {p['peer']} | {p['mode']} | {p['speedup']:,.1f}× |"
            for p in section["peers"]
        ]
    machine = section["machine"]
    load = section["load"]
    lines += [
        "",
        f"*{section['title']}. Measured by `{section['command']}` on {section['date']}: "
        f"{machine['cpus']} CPUs, "
        f"Python {machine['python']}, numpy {machine['numpy']}, dpkit {machine['dpkit']}; "
        f"load average {load['before'][0]} before, {load['after'][0]} after.*",
    ]
    for note in section.get("notes", []):
        lines += ["", f"*{note}*"]
    return "\n".join(lines)


def on_files(files: Files, config: Any) -> Files:
    assert _figures is not None
    for path in sorted(_figures.glob("*.png")):
        files.append(File.generated(config, f"figures/{path.name}", abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    markdown = BENCHMARK_MARKER.sub(lambda match: benchmark_table(match[1]), markdown)
    if not SCHEMA_MARKER.search(markdown):
        return markdown
    builtins = load_registry(
        entry_points=False, plugins=[("ldp", dpkit_ldp), ("central", dpkit_central)]
    )
    return SCHEMA_MARKER.sub(lambda match: schema_reference(match[1], builtins), markdown)


def tex_to_mathml(tex: str, *, display: bool) -> str:
    """MathML for one formula (LaTeX math mode), with the few fixes latex2mathml needs."""
    tex = LINE_BREAK_SPACING.sub(r"\\\\", tex)
    tex = UNKNOWN_OPERATOR.sub(r"\\operatorname{\1}", tex)
    tex = TEXT_COMMAND.sub(lambda m: m[1] + m[2].replace(r"\_", "_") + m[3], tex)
    mathml = str(latex_to_mathml(tex.strip(), display="block" if display else "inline"))
    return ACCENT.sub(_accent, mathml)


#: An accent over its base as latex2mathml writes it: ``\\hat`` and ``\\widehat`` with the ASCII
#: circumflex, ``\\tilde`` with the ASCII tilde, ``\\bar`` with a macron, mostly without
#: ``accent="true"``. The ASCII marks are spacing characters with an operator's metrics, and a
#: mover that is not an accent keeps a gap: browsers draw a detached ``^`` well above the letter.
ACCENT = re.compile(
    r"<mover(?: accent=\"true\")?>(?P<base>(?:(?!<mover).)*?)"  # the innermost mover
    r"<mo(?: stretchy=\"\w+\")?>(?P<mark>&#x0005E;|&#x0007E;|&#x000AF;)</mo></mover>"
)
#: Their accent forms (MathML Core's operator dictionary lists them as accents): the modifier
#: circumflex and small tilde, drawn tight over the base (the macron is one already).
ACCENT_MARKS = {"&#x0005E;": "&#x002C6;", "&#x0007E;": "&#x002DC;", "&#x000AF;": "&#x000AF;"}


def _accent(match: re.Match[str]) -> str:
    base = match["base"]
    # One letter: the accent keeps its size; a group (\\widehat{xy}) stretches it over the group.
    single = re.fullmatch(r"(<mrow>)?<(mi|mn)>[^<]*</\2>(?(1)</mrow>)", base) is not None
    stretchy = "false" if single else "true"
    mark = ACCENT_MARKS[match["mark"]]
    return f'<mover accent="true">{base}<mo stretchy="{stretchy}">{mark}</mo></mover>'


def render_math(content: str, where: str = "") -> str:
    """Replaces every arithmatex span/div of a page's HTML by its MathML."""

    def replace(match: re.Match[str]) -> str:
        tex = html.unescape(match["tex"])
        display = match["open"] == "["
        try:
            mathml = tex_to_mathml(tex, display=display)
        except Exception as error:  # latex2mathml raises many types; name the formula
            raise PluginError(f"{where}: cannot render the formula {tex!r}: {error}") from error
        return f'<{match["tag"]} class="arithmatex">{mathml}</{match["tag"]}>'

    return ARITHMATEX.sub(replace, content)


def on_page_content(content: str, page: Any, config: Any, files: Files) -> str:
    return render_math(content, page.file.src_uri)


def on_post_build(config: Any) -> None:
    global _figures
    if _figures is not None:
        shutil.rmtree(_figures, ignore_errors=True)
        _figures = None
