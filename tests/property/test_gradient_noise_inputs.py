"""DP-SGD's in-place noise step on hostile tensors: every torch dtype, views (transposed,
strided into a larger tensor), empty and 0-d tensors, parameters that require grad, values
at the edges of their dtype (NaN, ±inf, the largest finite, subnormals), several tensors at
once, in both randomness modes. ``add_gaussian_noise_`` either refuses the step with an
``InvalidData`` and writes nothing (a dtype that is not floating, a value that is not finite),
or writes every tensor in place: the same objects, dtypes and shapes, finite values where
the input was finite, the rest of a view's base untouched, and no autograd graph.

False-positive rate: 0 (keyed or seeded draws, exact checks, Hypothesis derandomized).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from dpkit_central import add_gaussian_noise_  # noqa: E402

from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData  # noqa: E402

DTYPES = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "int64": torch.int64,
    "bool": torch.bool,
    "complex64": torch.complex64,
}
FLOATING = ["float16", "bfloat16", "float32", "float64"]
LAYOUTS = ["plain", "transposed", "strided", "empty", "scalar", "parameter"]
#: A tensor as data: its dtype's name, its layout and its values (12, or 1 for a scalar).
Spec = tuple[str, str, tuple[float, ...]]


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    name = draw(st.sampled_from(FLOATING) if draw(st.booleans()) else st.sampled_from(list(DTYPES)))
    layout = draw(st.sampled_from(LAYOUTS))
    size = 1 if layout == "scalar" else 12
    dtype = DTYPES[name]
    if not dtype.is_floating_point:
        return (
            name,
            layout,
            tuple(
                float(v) for v in draw(st.lists(st.integers(0, 1), min_size=size, max_size=size))
            ),
        )
    edge = float(torch.finfo(dtype).max)
    pool = [0.0, -0.0, 1.5, -2.25, edge, -edge, float(torch.finfo(dtype).tiny) / 4]
    if draw(st.booleans()):  # a diverged gradient: some values not finite
        pool += [math.nan, math.inf, -math.inf]
    return name, layout, tuple(draw(st.lists(st.sampled_from(pool), min_size=size, max_size=size)))


def _tensor(spec: Spec) -> tuple[Any, Any]:
    """(the tensor to noise, the base whose memory it views)."""
    name, layout, values = spec
    dtype = DTYPES[name]
    if layout == "empty":
        base = torch.zeros((0, 3), dtype=dtype)
        return base, base
    if layout == "scalar":
        base = torch.tensor(values[0], dtype=dtype)
        return base, base
    base = torch.tensor(values, dtype=dtype).reshape(3, 4)
    if layout == "transposed":
        return base.T, base
    if layout == "strided":
        return base[:, ::2], base
    if layout == "parameter" and dtype.is_floating_point:
        parameter = torch.nn.Parameter(base)
        return parameter, parameter
    return base, base


def _same(a: Any, b: Any) -> bool:
    return bool(torch.equal(a, b)) or bool(
        torch.equal(torch.nan_to_num(a.double()), torch.nan_to_num(b.double()))
        and torch.equal(torch.isnan(a.double()), torch.isnan(b.double()))
    )


EDGE16 = ("float16", "plain", (65504.0,) * 12)
DIVERGED = ("float32", "plain", (1.0,) * 11 + (math.nan,))


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(
    step=st.lists(specs(), min_size=1, max_size=3),
    mode=st.sampled_from(["secure", "fast"]),
    std=st.sampled_from([1.0, 1e3]),
)
@example(step=[EDGE16], mode="fast", std=1e3)  # rounds past float16's largest without a clamp
@example(step=[("float64", "strided", (0.0,) * 12), DIVERGED], mode="secure", std=1.0)
def test_a_step_is_refused_whole_or_written_in_place(
    step: list[Spec], mode: str, std: float
) -> None:
    drawn = [_tensor(spec) for spec in step]
    tensors = [t for t, _ in drawn]
    bases = [b.detach().clone() for _, b in drawn]
    before = [t.detach().clone() for t in tensors]
    rng = SecureRandom.from_key(bytes(32)) if mode == "secure" else torch.Generator().manual_seed(1)
    floating = all(t.dtype.is_floating_point for t in tensors)
    finite = all(bool(torch.isfinite(t.detach().double()).all()) for t in tensors if floating)
    if not (floating and finite):
        with pytest.raises(InvalidData, match="add_gaussian_noise_"):
            add_gaussian_noise_(tensors, std, sensitivity=1.0, rng=rng)
        assert all(_same(t.detach(), b) for t, b in zip(tensors, before, strict=True))
        return
    returned = add_gaussian_noise_(tensors, std, sensitivity=1.0, rng=rng)
    assert returned is tensors
    for (tensor, base), old_base, old in zip(drawn, bases, before, strict=True):
        assert tensor.dtype == old.dtype and tensor.shape == old.shape
        assert tensor.grad_fn is None
        assert bool(torch.isfinite(tensor.detach().double()).all())
        if base is not tensor:  # a view: only its own elements of the base were written
            mask = torch.ones_like(base, dtype=torch.bool)
            (mask.T if tensor.shape == base.T.shape else mask[:, ::2])[...] = False
            assert _same(base.detach()[mask], old_base[mask])
