"""The optional matplotlib dependency, dpkit's figure style, and saving figures.

matplotlib is imported lazily, inside the functions that draw, so ``import dpkit`` and
``import dpkit.plot`` work without it; drawing without it raises :class:`MissingDependency`
(a :class:`dpkit.DPKitError` and an :class:`ImportError`) that says how to install it.

Figures are built with the object API (:class:`matplotlib.figure.Figure`), never pyplot, so
drawing touches no global figure state and works headless (no display, no backend choice).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from dpkit.errors import InvalidParameter, MissingDependency

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "FORMATS",
    "MARKERS",
    "PALETTE",
    "MissingDependency",
    "check_output",
    "new_figure",
    "require",
    "save",
    "style_axes",
]

#: The Okabe–Ito palette (Okabe & Ito 2008, "Color Universal Design"), distinguishable under
#: the common forms of colour-vision deficiency; black first, yellow last (weak on white).
PALETTE: tuple[str, ...] = (
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#000000",  # black
    "#F0E442",  # yellow
)

#: Marker shapes paired with the palette, so series stay distinct in greyscale too.
MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P", "X", "*")

#: File formats :func:`save` writes (by file-name suffix).
FORMATS: tuple[str, ...] = (".png", ".svg", ".pdf")

_STYLE: dict[str, Any] = {
    "font.size": 11.0,
    "axes.titlesize": 12.5,
    "axes.labelsize": 11.0,
    "xtick.labelsize": 10.0,
    "ytick.labelsize": 10.0,
    "legend.fontsize": 10.0,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#b0b0b0",
    "grid.linewidth": 0.6,
    "grid.alpha": 0.5,
    "axes.axisbelow": True,
    "lines.linewidth": 2.0,
    "lines.markersize": 6.0,
    "savefig.dpi": 150,
}


def require() -> ModuleType:
    """Import and return matplotlib, or raise :class:`MissingDependency`."""
    try:
        import matplotlib
        import matplotlib.figure  # the object API used by every figure
    except ImportError:
        raise MissingDependency("matplotlib", "plot", needed_by="dpkit.plot") from None
    return matplotlib


@contextmanager
def new_figure(width: float = 7.0, height: float = 4.2) -> Iterator[Figure]:
    """Yield a new :class:`~matplotlib.figure.Figure` (constrained layout) in dpkit's style.

    The style applies while the figure is drawn inside the ``with`` block (matplotlib reads
    rc parameters when an artist is created); nothing global is left changed afterwards.
    """
    matplotlib = require()
    from cycler import cycler
    from matplotlib.figure import Figure

    style = dict(_STYLE)
    style["axes.prop_cycle"] = cycler(color=list(PALETTE))
    with matplotlib.rc_context(style):
        yield Figure(figsize=(width, height), layout="constrained")


def style_axes(ax: Axes, *, grid: str = "both") -> None:
    """Fix the tick and grid style on ``ax`` (ticks are created lazily, at draw time, which
    may be after the style context of :func:`new_figure` has ended)."""
    ax.tick_params(labelsize=_STYLE["xtick.labelsize"], colors="#303030")
    ax.grid(False)
    if grid != "none":
        ax.grid(
            True,
            axis=grid,  # type: ignore[arg-type]
            color=_STYLE["grid.color"],
            linewidth=_STYLE["grid.linewidth"],
            alpha=_STYLE["grid.alpha"],
        )


def check_output(path: str | os.PathLike[str], /, *, name: str = "out") -> Path:
    """Check that ``path`` names a figure file :func:`save` can write (before drawing it).

    Raises :class:`dpkit.InvalidParameter` naming ``name`` when the suffix is not one of
    :data:`FORMATS` or the directory does not exist.
    """
    target = Path(os.fspath(path))
    if target.suffix.lower() not in FORMATS:
        raise InvalidParameter(
            name, str(path), "a file name ending in " + ", ".join(FORMATS), owner="dpkit.plot"
        )
    if target.is_dir() or not target.parent.is_dir():
        raise InvalidParameter(
            name, str(path), "a file in an existing directory", owner="dpkit.plot"
        )
    return target


def save(figure: Figure, path: str | os.PathLike[str], /, *, dpi: int = 150) -> Path:
    """Write ``figure`` to ``path`` (format from the suffix: .png, .svg or .pdf); return the path.

    Raises :class:`dpkit.InvalidParameter` naming ``out`` when the suffix is not supported,
    the directory does not exist, or the file cannot be written.
    """
    target = check_output(path)
    try:
        figure.savefig(target, dpi=dpi, metadata=_metadata(target.suffix.lower()))
    except OSError as error:
        raise InvalidParameter(
            "out",
            str(path),
            f"a writable file path ({error.strerror or error})",
            owner="dpkit.plot",
        ) from None
    return target


def _metadata(suffix: str) -> dict[str, Any]:
    """Reproducible output: no creation date or software version stamped into the file."""
    if suffix == ".png":
        return {"Software": None}
    if suffix == ".svg":
        return {"Date": None}
    return {"CreationDate": None, "Producer": None}
