"""Every code example of the documentation site runs (docs/**/*.md).

The conventions (also in docs/contributing.md):

* a block with ``title="PATH"`` on its fence is a file: it is written to PATH, not run;
* ``python`` blocks run in order in one namespace per page, in a fresh working directory;
* ``console`` blocks: every line starting with ``$ `` runs in bash in that directory and must
  exit 0, or the code written after it as ``# exits N``; the lines after a command, up to the
  next one, are its shown output and must be what it prints (stdout and stderr together, as a
  terminal shows them; a command shown without output is not compared);
  ``$ pip install X`` installs X (without dependencies) into the page's own directory, which is
  on the PYTHONPATH of the page's commands: a page can install a plugin without changing the
  environment of the tests;
* ``bash`` blocks are not run, so they may only hold setup lines (install, clone, cd, the
  repository's own scripts, which CI runs anyway) benchmark commands (minutes each) and the site build (a test of its own);
* a ``text`` block right after a python block that prints is that block's output, and must be
  what it prints (write ``text abridged`` on the fence to show a part of it);
* **masks**, in shown output (console or text): ``…`` within a line stands for any text on that
  line (a time, a path, a version, a random draw: say in the prose what it hides), and a line
  that is only ``…`` for any number of whole lines. Everything else is compared exactly (after
  trailing spaces and leading and trailing blank lines are removed);
* ``json``, ``toml`` and the rest are data.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

PAGE_SITE = "page-site-packages"
REPOSITORY = Path(__file__).resolve().parents[2]
DOCS = REPOSITORY / "docs"
#: A third-party package kept under docs/ as a real plugin; its README is not a site page.
NOT_PAGES = (DOCS / "plugins" / "example",)

SETUP_LINE = re.compile(
    r"^(\S*pip install |python -m pip install |python -m venv |git clone |cd |\./scripts/"
    r"|(\S*/)?python benchmarks/|python -m mkdocs |#|$)"
)
TITLE = re.compile(r'title="(?P<path>[^"]+)"')
EXPECTED_EXIT = re.compile(r"\s+#\s*exits\s+(\d+)\s*$")
FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)(?P<info>[^\n]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
    re.M | re.S,
)


@attrs.frozen
class Block:
    page: Path
    line: int
    language: str
    source: str
    info: str = ""
    #: Only blank lines separate this block from the previous one.
    follows_previous: bool = False

    @property
    def where(self) -> str:
        page = (
            self.page.relative_to(REPOSITORY) if self.page.is_relative_to(REPOSITORY) else self.page
        )
        return f"{page}:{self.line}"


@attrs.frozen
class Command:
    text: str
    expected_exit: int
    #: The output shown after the command (compared with what it prints when not empty).
    shown: tuple[str, ...] = ()


#: In shown output: any text within a line; a line of it alone, any number of lines.
MASK = "…"


def shows(shown: str, printed: str) -> bool:
    """Whether ``printed`` is what ``shown`` shows, its masks (:data:`MASK`) filled in."""
    pattern = ""
    for line in _lines(shown):
        if line.strip() == MASK:
            pattern += r"(?:[^\n]*\n)*?"
        else:
            pattern += ".*?".join(re.escape(part) for part in line.split(MASK)) + r"\n"
    text = "".join(line + "\n" for line in _lines(printed))
    return re.fullmatch(pattern, text) is not None


def pages() -> list[Path]:
    return sorted(
        page
        for page in DOCS.rglob("*.md")
        if not any(page.is_relative_to(excluded) for excluded in NOT_PAGES)
    )


def blocks(page: Path) -> Iterator[Block]:
    text = page.read_text(encoding="utf-8")
    previous_end = None
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        body = textwrap.dedent(match["body"]) if match["indent"] else match["body"]
        adjacent = previous_end is not None and not text[previous_end : match.start()].strip()
        yield Block(page, line, match["lang"].lower(), body, match["info"].strip(), adjacent)
        previous_end = match.end()


def commands(block: Block) -> list[Command]:
    """The ``$ `` lines of a console block (a trailing backslash continues a command), each
    with the output lines shown after it."""
    found: list[Command] = []
    pending: str | None = None
    output: list[str] = []
    for line in block.source.splitlines():
        if pending is not None:
            pending += "\n" + line
        elif line.startswith("$ "):
            pending = line[2:]
        else:
            output.append(line)
            continue
        if pending.endswith("\\"):
            continue
        _shown(found, output)
        expected = EXPECTED_EXIT.search(pending)
        text = EXPECTED_EXIT.sub("", pending) if expected else pending
        found.append(Command(text, int(expected[1]) if expected else 0))
        pending = None
    _shown(found, output)
    return found


def _shown(found: list[Command], output: list[str]) -> None:
    """Gives the output lines collected so far to the last command found."""
    if found and any(line.strip() for line in output):
        found[-1] = attrs.evolve(found[-1], shown=tuple(_lines("\n".join(output))))
    output.clear()


def _page_id(page: Path) -> str:
    return str(page.relative_to(DOCS))


def _run_console(block: Block, cwd: Path, env: dict[str, str]) -> None:
    site = cwd / PAGE_SITE
    env = dict(env, PYTHONPATH=os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")])))
    for command in commands(block):
        text = command.text
        if text.startswith("pip install "):
            text = (
                f"python -m pip install --quiet --no-deps --target {site} "
                + text[len("pip install ") :]
            )
        done = subprocess.run(
            ["bash", "-c", text],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
        )
        assert done.returncode == command.expected_exit, (
            f"{block.where}: `{command.text}` exited {done.returncode}, "
            f"expected {command.expected_exit}\n{done.stdout}"
        )
        if command.shown:
            assert shows("\n".join(command.shown), done.stdout), (
                f"{block.where}: the output shown for `{command.text}` is not what it "
                f"prints:\n{done.stdout}"
            )


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["DPKIT_REPO"] = str(REPOSITORY)
    env["MPLBACKEND"] = "Agg"
    return env


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def test_the_site_has_pages() -> None:
    assert len(pages()) >= 10


def run_page(page: Path, cwd: Path) -> None:
    """Runs the page's python and console blocks in order in ``cwd``, checking shown outputs."""
    namespace: dict[str, object] = {"__name__": f"docs.{page.stem}"}
    env = _environment()
    printed: str | None = None
    for block in blocks(page):
        shown = block.language == "text" and block.follows_previous and block.info != "abridged"
        if shown and printed:
            assert shows(block.source, printed), (
                f"{block.where}: the shown output is not what the example prints:\n{printed}"
            )
        printed = None
        title = TITLE.search(block.info)
        if title:
            path = cwd / title["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block.source, encoding="utf-8")
        elif block.language == "python":
            output = io.StringIO()
            with contextlib.redirect_stdout(output):
                exec(compile(block.source, block.where, "exec"), namespace)
            printed = output.getvalue()
        elif block.language == "console":
            assert commands(block), f"{block.where}: a console block without a `$ ` command"
            _run_console(block, cwd, env)


#: Pages whose examples need a PostgreSQL ledger: they read its URL from DPKIT_LEDGER_URL, set
#: here to a fresh ledger on the tests' own server (tests/conftest.py).
POSTGRES_PAGES = ("scaling.md",)
#: Pages whose examples run Spark: the tests' own session is started first, so that the page's
#: ``getOrCreate()`` reuses it (one Spark session for the whole test run; tests/conftest.py).
SPARK_PAGES = ("scaling.md",)
#: Pages whose examples open a Spark Connect session: they read the URL of the tests' Connect
#: server from DPKIT_SPARK_CONNECT_URL. PySpark's ``SparkSession.builder.remote(...)`` switches
#: the whole process to Connect mode (``SPARK_CONNECT_MODE_ENABLED``), which would break the
#: classic session of the tests that follow: the variable is put back as it was.
SPARK_CONNECT_PAGES = ("scaling.md",)


def _page_params() -> list[Any]:
    """The pages; those on the tests' Spark session in the Spark run (tests/conftest.py)."""
    return [
        pytest.param(page, marks=pytest.mark.spark) if page.name in SPARK_PAGES else page
        for page in pages()
    ]


@pytest.mark.parametrize("page", _page_params(), ids=_page_id)
def test_page_examples_run(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    if page.name in POSTGRES_PAGES:
        monkeypatch.setenv("DPKIT_LEDGER_URL", request.getfixturevalue("postgres_server").url())
    if page.name in SPARK_PAGES:
        request.getfixturevalue("spark")
    if page.name in SPARK_CONNECT_PAGES:
        server = request.getfixturevalue("spark_connect_server")
        monkeypatch.setenv("DPKIT_SPARK_CONNECT_URL", server.url)
        monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "")  # (undone at teardown:
        monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED")  # the variable removed again)
    run_page(page, tmp_path)


@pytest.mark.parametrize("page", pages(), ids=_page_id)
def test_unexecuted_blocks_are_setup_only(page: Path) -> None:
    for block in blocks(page):
        if block.language in {"bash", "sh", "shell", ""}:
            assert block.language == "bash", f"{block.where}: say the block's language"
            for line in block.source.splitlines():
                assert SETUP_LINE.match(line.strip()), (
                    f"{block.where}: `{line}` is not run by any test; use a console block"
                )


def test_blocks_are_found_inside_admonitions(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "!!! note\n    ```python\n    x = 1\n    ```\n\n```console\n$ a \\\n  b  # exits 3\nout\n```\n"
        "text\n```text abridged\n...\n```\n"
    )
    found = list(blocks(page))
    assert [(b.language, b.source, b.follows_previous) for b in found] == [
        ("python", "x = 1\n", False),
        ("console", "$ a \\\n  b  # exits 3\nout\n", True),
        ("text", "...\n", False),
    ]
    assert found[2].info == "abridged"
    assert commands(found[1]) == [Command("a \\\n  b", 3, ("out",))]


def test_a_wrong_output_or_exit_code_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nprint(6 * 7)\n```\n\n```text\n42\n```\n")
    run_page(page, tmp_path)
    page.write_text("```python\nprint(6 * 7)\n```\n\n```text\n41\n```\n")
    with pytest.raises(AssertionError, match="not what the example prints"):
        run_page(page, tmp_path)
    page.write_text("```console\n$ exit 3\n```\n")
    with pytest.raises(AssertionError, match="exited 3, expected 0"):
        run_page(page, tmp_path)
    page.write_text("```console\n$ exit 3  # exits 3\n```\n")
    run_page(page, tmp_path)


def test_a_titled_block_is_a_file(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        '```python title="pkg/mod.py"\nraise SystemExit(1)\n```\n\n```console\n$ grep -q SystemExit pkg/mod.py\n```\n'
    )
    run_page(page, tmp_path)


def test_a_drifted_console_output_is_caught(tmp_path: Path) -> None:
    """The output shown after a command is compared with what it prints (stderr included)."""
    page = tmp_path / "page.md"
    page.write_text("```console\n$ echo 42; echo oops >&2\n42\noops\n$ true\n```\n")
    run_page(page, tmp_path)
    page.write_text("```console\n$ echo 41\n42\n```\n")
    with pytest.raises(AssertionError, match="output shown for `echo 41` is not what it prints"):
        run_page(page, tmp_path)


def test_masks_hide_noisy_fields_and_nothing_else() -> None:
    printed = "took 1.23 s\nrow 1\nrow 2\nrow 3\nspent ε=0.5\n"
    assert shows("took … s\nrow 1\n…\nspent ε=0.5", printed)
    assert shows("took … s\n…", printed)
    assert not shows("took … s\nrow 1\nspent ε=0.5", printed)  # lines are not skipped unasked
    assert not shows("took … s\nrow 1\n…\nspent ε=0.6", printed)
    assert not shows("row …", "row 1\nrow 2")  # a mark within a line never spans lines
