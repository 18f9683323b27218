"""The documentation site builds with warnings as errors, with its generated parts in it.

The built site works offline: it loads nothing from the network (no CDN script, no web font),
and its math is MathML rendered at build time, not TeX left for a script to typeset.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dpkit

# The site's build hooks need the docs extra; without it these tests skip, the rest of the run goes on.
pytest.importorskip("latex2mathml", reason="needs the docs extra: pip install -e '.[docs]'")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs_build"))
import hooks

REPOSITORY = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"
#: A URL that leaves the site: with a scheme (http:, https:, ...) or protocol-relative (//host).
EXTERNAL = r"(?:[a-zA-Z][a-zA-Z0-9+.-]*:|//)"
LOADS_EXTERNAL = [
    re.compile(rf"<script\b[^>]*\bsrc\s*=\s*[\"']?{EXTERNAL}", re.I),
    re.compile(rf"<link\b[^>]*\bhref\s*=\s*[\"']?{EXTERNAL}", re.I),
    re.compile(rf"<img\b[^>]*\bsrc\s*=\s*[\"']?{EXTERNAL}", re.I),
    re.compile(rf"<(?:iframe|source|video|audio|embed)\b[^>]*\bsrc\s*=\s*[\"']?{EXTERNAL}", re.I),
    re.compile(rf"@import\s+(?:url\()?\s*[\"']?{EXTERNAL}", re.I),
    re.compile(r"url\(\s*[\"']?(?:https?:)?//", re.I),  # CSS url(): fonts, images
]
#: TeX left for a client-side script: MathJax/KaTeX delimiters in the visible text.
UNRENDERED_TEX = re.compile(r"\\\(|\\\[|\$\$")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built from this tree: the one ``.ci/run`` has just built with the README's
    command (``scripts/docs``: ``mkdocs build --strict``) when it names it in DPKIT_BUILT_SITE,
    else a build of our own."""
    built = os.environ.get("DPKIT_BUILT_SITE")
    if built:
        assert (Path(built) / "index.html").is_file(), f"DPKIT_BUILT_SITE={built}: no site there"
        return Path(built)
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1", MPLBACKEND="Agg"),
    )
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.integration
def test_figures_are_drawn_by_the_build(site: Path) -> None:
    for name in ("histogram", "utility", "numeric", "audit", "budget", "benchmarks"):
        figure = site / "figures" / f"{name}.png"
        assert figure.read_bytes()[:8] == PNG, name
    assert not (REPOSITORY / "docs" / "figures").exists(), "figures must not be written into docs/"


@pytest.mark.integration
def test_spec_reference_is_generated_from_the_schemas(site: Path) -> None:
    page = (site / "spec" / "index.html").read_text(encoding="utf-8")
    assert "dpkit:schema" not in page
    for anchor in (
        "query-input",
        "session-queries-item",
        "result-amount",
        "query-statistics-quantile",
    ):
        assert f'id="{anchor}"' in page, anchor


@pytest.mark.integration
def test_every_page_of_the_nav_is_built(site: Path) -> None:
    nav = (REPOSITORY / "mkdocs.yml").read_text(encoding="utf-8")
    for page in re.findall(r":\s*(\S+\.md)\s*$", nav, re.M):
        built = site / (page[: -len(".md")] + "/index.html" if page != "index.md" else "index.html")
        if page.endswith("/index.md"):
            built = site / page.replace("index.md", "index.html")
        assert built.exists(), page


def test_every_builtin_mechanism_has_a_page() -> None:
    nav = (REPOSITORY / "mkdocs.yml").read_text(encoding="utf-8")
    builtins = [
        name
        for name, info in dpkit.get_registry().mechanisms.items()
        if info.provenance.distribution == "dpkit"
    ]
    assert len(builtins) >= 12
    for name in builtins:
        page = REPOSITORY / "docs" / "mechanisms" / f"{name}.md"
        assert page.exists(), f"no page for {name}"
        assert f"mechanisms/{name}.md" in nav, f"{name} is not in the navigation"
        text = page.read_text(encoding="utf-8")
        for section in ("## Definition", "## Privacy", "## Parameters", "## Example", "## Source"):
            assert section in text, f"{name}: missing {section}"


def _text(page: str) -> str:
    """The visible text of a page: no tags, scripts, styles or code blocks."""
    page = re.sub(r"<(script|style|pre|code)\b.*?</\1>", "", page, flags=re.S | re.I)
    return re.sub(r"<[^>]+>", "", page)


def test_an_external_reference_is_caught() -> None:
    loads = [
        '<script src="https://unpkg.com/mathjax@3/es5/tex-mml-chtml.js"></script>',
        "<link rel=stylesheet href=//fonts.googleapis.com/css?family=Roboto>",
        '<img alt="" src="http://example.com/a.png">',
        '@import url("https://fonts.googleapis.com/css2");',
    ]
    for load in loads:
        assert any(pattern.search(load) for pattern in LOADS_EXTERNAL), load
    local = '<script src="../assets/javascripts/bundle.js"></script><a href="https://x.org">x</a>'
    assert not any(pattern.search(local) for pattern in LOADS_EXTERNAL)


def test_math_is_rendered_to_mathml() -> None:
    page = (
        '<p>so <span class="arithmatex">\\(p &lt; q\\)</span> and</p>\n'
        '<div class="arithmatex">\\[\n\\texttt{frequency\\_variance} \\\\[2ex] \\arg\\max_r u\n\\]</div>'
    )
    rendered = hooks.render_math(page, "page.md")
    assert rendered.count("<math ") == 2 and 'display="block"' in rendered
    assert not UNRENDERED_TEX.search(_text(rendered))
    assert "\\" not in rendered, "a TeX command was printed instead of rendered"
    assert "frequency_variance" in rendered
    assert re.search(r"<mo>(&lt;|&#x0003C;)</mo>", rendered), "the escaped < is an operator"


@pytest.mark.integration
def test_the_site_loads_nothing_from_the_network(site: Path) -> None:
    offenders = []
    for path in sorted(site.rglob("*")):
        if path.suffix not in {".html", ".css", ".js"}:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        patterns = LOADS_EXTERNAL if path.suffix != ".js" else LOADS_EXTERNAL[-2:]
        for pattern in patterns:
            for match in pattern.finditer(text):
                offenders.append(f"{path.relative_to(site)}: {match[0][:120]}")
    assert offenders == []


@pytest.mark.integration
def test_no_tex_is_left_unrendered(site: Path) -> None:
    math_pages = 0
    for path in sorted(site.rglob("*.html")):
        page = path.read_text(encoding="utf-8")
        if "arithmatex" not in page:
            continue
        math_pages += 1
        assert "<math " in page, path
        leftover = UNRENDERED_TEX.search(_text(page))
        assert leftover is None, f"{path.relative_to(site)}: unrendered TeX {leftover}"
    assert math_pages >= 10


@pytest.mark.integration
def test_the_api_reference_has_every_public_name(site: Path) -> None:
    top = (site / "api" / "dpkit" / "index.html").read_text(encoding="utf-8")
    missing = [name for name in dpkit.__all__ if f'id="dpkit.{name}"' not in top]
    assert missing == [], "missing from the API reference (docs/api/dpkit.md)"
    for module_name, page in (
        ("dpkit.plugin", "plugin"),
        ("dpkit.spec", "spec"),
        ("dpkit.testing", "testing"),
        ("dpkit.ledger", "ledger"),
        ("dpkit.tables", "tables"),
        ("dpkit_central", "dpkit_central"),
    ):
        module = importlib.import_module(module_name)
        html = (site / "api" / page / "index.html").read_text(encoding="utf-8")
        missing = [name for name in module.__all__ if f'id="{module.__name__}.{name}"' not in html]
        assert missing == [], f"missing from docs/api/{page}.md"
    ldp = (site / "api" / "dpkit_ldp" / "index.html").read_text(encoding="utf-8")
    for name in ("simulate_counts", "synthetic", "stochastic_discretize", "estimate_mean"):
        assert re.search(rf'id="dpkit_ldp\.\w+\.{name}"', ldp), name
    for name in ("RandomizedResponse", "KaryRandomizedResponse", "HadamardResponse"):
        assert re.search(rf'id="dpkit_ldp\.\w+\.{name}"', ldp), name


def test_the_site_uses_no_google_fonts() -> None:
    config = (REPOSITORY / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^  font: false$", config, re.M), "theme.font: false (no Google Fonts)"


def _css_rule(selector: str) -> str:
    css = (REPOSITORY / "docs" / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    rule = re.search(re.escape(selector) + r" \{(?P<body>[^}]*)\}", css)
    assert rule, f"no rule for {selector} in docs/stylesheets/extra.css"
    return rule["body"]


def test_long_code_lines_scroll_with_a_visible_scrollbar() -> None:
    """A soft-wrapped code line has no continuation marker (a wrapped argument reads as a new
    statement): long lines scroll, the scrollbar is always drawn, and a shadow marks the edge."""
    body = _css_rule(".md-typeset pre > code")
    assert re.search(r"white-space:\s*pre;", body) and "overflow-x: auto" in body
    assert "pre-wrap" not in body and "overflow-wrap" not in body
    assert "scrollbar-color" in body and "local" in body and "scroll" in body
    assert "height: 0.5rem" in _css_rule(".md-typeset pre > code::-webkit-scrollbar")


def test_display_math_is_never_clipped() -> None:
    """``overflow-y: hidden`` cut off the top of display fractions; room is padding instead."""
    body = _css_rule(".md-typeset div.arithmatex")
    assert "overflow-y" not in body and "overflow-x: auto" in body
    padding = re.search(r"padding:\s*([\d.]+)em", body)
    assert padding and float(padding[1]) >= 0.4


def test_accents_sit_on_their_letter() -> None:
    """latex2mathml writes \\hat with the ASCII ^ (a spacing character, drawn detached above the
    letter) and often without accent="true": the site uses the accent forms."""
    hat = hooks.tex_to_mathml(
        r"\hat c_v = \hat{\sigma} + \widehat{xy} + \tilde{x} + \bar{x}", display=False
    )
    assert "&#x0005E;" not in hat and "&#x0007E;" not in hat
    assert hat.count('<mover accent="true">') == 5 and "<mover>" not in hat
    assert '<mover accent="true"><mi>c</mi><mo stretchy="false">&#x002C6;</mo></mover>' in hat
    assert '<mrow><mi>x</mi><mi>y</mi></mrow><mo stretchy="true">&#x002C6;</mo>' in hat
    assert "&#x002DC;" in hat
    over = hooks.tex_to_mathml(r"\overset{a}{b}", display=False)
    assert "accent" not in over  # not an accent: left alone


def test_the_api_reference_opens_on_the_entry_points() -> None:
    """docs/api/dpkit.md lists every name of dpkit.__all__ once, the entry points first."""
    page = (REPOSITORY / "docs" / "api" / "dpkit.md").read_text(encoding="utf-8")
    listed = re.findall(r"^ {8}- (\S+)$", page, re.M)
    assert sorted(listed) == sorted(dpkit.__all__) and len(set(listed)) == len(listed)
    assert listed[:5] == ["Session", "mechanism", "estimate", "account", "calibrate"]
    nav = (REPOSITORY / "mkdocs.yml").read_text(encoding="utf-8")
    assert "dpkit.plot: api/plot.md" in nav
    plot = (REPOSITORY / "docs" / "api" / "plot.md").read_text(encoding="utf-8")
    assert "::: dpkit.plot" in plot


@pytest.mark.integration
def test_the_built_api_reference(site: Path) -> None:
    """The dpkit page opens on Session; no attribute carries two badges; dpkit.plot has a page
    with the figure functions."""
    top = (site / "api" / "dpkit" / "index.html").read_text(encoding="utf-8")
    headings = re.findall(r'<h2 id="(dpkit\.[^"]+)"', top)
    assert headings[:3] == ["dpkit.Session", "dpkit.mechanism", "dpkit.estimate"], headings[:5]
    for path in (site / "api").rglob("index.html"):
        html = path.read_text(encoding="utf-8")
        for labels in re.findall(r'<span class="doc doc-labels">(.*?)</span>', html, re.S):
            found = re.findall(r"<code>([^<]*)</code>", labels)
            assert not {"class-attribute", "instance-attribute"} <= set(found), path
    plot = (site / "api" / "plot" / "index.html").read_text(encoding="utf-8")
    module = importlib.import_module("dpkit.plot")
    missing = [name for name in module.__all__ if f'id="dpkit.plot.{name}"' not in plot]
    assert missing == []
    for page in ("index.html", "quickstart/index.html", "ldp-experiment/index.html"):
        assert "stylesheets/extra.css" in (site / page).read_text(encoding="utf-8"), page
