"""MkDocs hooks: the parts of the site that the library generates at build time.

* ``figures/*.png`` are drawn by :func:`dpkit.plot.docs_figures` into a temporary directory and
  added to the site as generated files (nothing is written into ``docs/``, nothing is committed);
* ``figures/benchmarks.png`` is drawn from the measurements recorded in
  ``benchmarks/results.json``;
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
    benchmark_figure(REPOSITORY / "benchmarks" / "results.json", _figures / "benchmarks.png")


def benchmark_figure(results: Path, out: Path) -> None:
    """Horizontal bars: dpkit's speed-up over each peer, per task, on a log scale."""
    from matplotlib.figure import Figure

    rows = json.loads(results.read_text(encoding="utf-8"))["measurements"]
    peers = sorted({row["peer"] for row in rows})
    colours = dict(zip(peers, PALETTE, strict=False))  # fewer peers than colours
    figure = Figure(figsize=(7.5, 0.45 * len(rows) + 1.2), layout="constrained")
    axes = figure.add_subplot()
    labels = [f"{row['task']} vs {row['peer']}" for row in rows]
    speedups = [row["speedup"] for row in rows]
    bars = axes.barh(labels, speedups, color=[colours[row["peer"]] for row in rows])
    axes.bar_label(bars, labels=[f"{s:g}×" for s in speedups], padding=3, fontsize=9)
    axes.set_xscale("log")
    axes.set_xlim(1, max(speedups) * 3)
    axes.invert_yaxis()
    axes.set_xlabel("times faster than the peer library (same run, log scale)")
    axes.spines[["top", "right"]].set_visible(False)
    figure.savefig(out, dpi=120)


def on_files(files: Files, config: Any) -> Files:
    assert _figures is not None
    for path in sorted(_figures.glob("*.png")):
        files.append(File.generated(config, f"figures/{path.name}", abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
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
    return str(latex_to_mathml(tex.strip(), display="block" if display else "inline"))


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
