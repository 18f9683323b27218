"""DP-SGD's noise step, in place: ``add_gaussian_noise_`` on torch CPU tensors and numpy arrays
(a CUDA tensor's run is in ``tests/unit/tensors/test_cuda.py``).

The privacy of a step rests on one fact checked here exactly: every tensor of the step is
released on the Gaussian mechanism's lattice planned for *all* the step's coordinates (its
variance covers the rounding of each, L2 sensitivity C + g·√d), so the whole step is one
``GaussianDP(noise_multiplier=std / C)``. The statistical test (the noise's variance) is a
normal z-test at |z| < 6, false-positive rate 2e-9.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from dpkit_central import add_gaussian_noise_
from dpkit_central import gaussian as gaussian_module
from dpkit_central.gaussian import LatticeGaussian

from dpkit import SecureRandom
from dpkit.errors import InvalidData, InvalidParameter

torch = pytest.importorskip("torch")
KEY = bytes(range(32))


def test_the_tensors_are_noised_in_place_keeping_dtype_and_device() -> None:
    grads = [torch.zeros(3, 2), torch.ones(4, dtype=torch.float64), torch.zeros(2).bfloat16()]
    ids = [id(g) for g in grads]
    returned = add_gaussian_noise_(grads, 1.5, sensitivity=1.0)
    assert returned is grads and [id(g) for g in grads] == ids
    assert [g.dtype for g in grads] == [torch.float32, torch.float64, torch.bfloat16]
    assert all(bool((g != 0).any()) for g in grads)
    array = np.zeros(6)
    assert add_gaussian_noise_(array, 1.5, sensitivity=1.0) is array and bool(array.any())


def test_a_step_is_planned_for_all_its_coordinates(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each tensor's lattice plan covers the rounding of the step's d = 6 + 4 coordinates (a
    plan per tensor would cover only its own, and the step would exceed its GaussianDP)."""
    planned: list[int] = []
    plan = LatticeGaussian.plan

    def spy(sigma: float, sensitivity: float, coordinates: int, **kwargs: Any) -> Any:
        planned.append(coordinates)
        return plan(sigma, sensitivity, coordinates, **kwargs)

    monkeypatch.setattr(gaussian_module.LatticeGaussian, "plan", spy)
    grads = [torch.zeros(3, 2), torch.zeros(4)]
    add_gaussian_noise_(grads, 2.0, sensitivity=1.0, rng=SecureRandom.from_key(KEY))
    assert planned == [10, 10]
    step = plan(2.0, 1.0, 10).step
    for g in grads:  # zero gradients: the noise alone, every value a multiple of g
        values = g.double().numpy() / step
        assert np.array_equal(values, np.round(values))


def test_the_noise_has_the_planned_variance() -> None:
    """n = 200 000 draws of σ = 3: the sample variance of the noise against the plan's
    g²·σ_L² (≈ σ², the continuous σ raised to cover the rounding), z-test at |z| < 6."""
    n, std = 200_000, 3.0
    noise = torch.zeros(n, dtype=torch.float64)
    add_gaussian_noise_(noise, std, sensitivity=1.0, rng=SecureRandom.from_key(KEY))
    variance = LatticeGaussian.plan(std, 1.0, n).noise_std ** 2
    z = (float(noise.var()) - variance) / (variance * math.sqrt(2 / (n - 1)))
    assert abs(z) < 6
    assert abs(float(noise.mean())) < 6 * std / math.sqrt(n)


def test_fast_mode_takes_a_torch_generator_and_is_reproducible() -> None:
    first, second = torch.zeros(5), torch.zeros(5)
    add_gaussian_noise_(first, 1.0, sensitivity=1.0, rng=torch.Generator().manual_seed(4))
    add_gaussian_noise_(second, 1.0, sensitivity=1.0, rng=torch.Generator().manual_seed(4))
    assert torch.equal(first, second) and bool((first != 0).any())


def test_a_parameter_requiring_grad_is_noised_without_a_graph() -> None:
    parameter = torch.nn.Parameter(torch.zeros(3))
    add_gaussian_noise_(parameter, 1.0, sensitivity=1.0)
    assert parameter.grad_fn is None and bool((parameter != 0).any())


@pytest.mark.parametrize(
    "tensors", [torch.zeros(3, dtype=torch.int64), np.zeros(3, dtype=np.int32), "gradients"]
)
def test_what_cannot_be_noised_in_place_is_refused_before_any_value_is_read(tensors: Any) -> None:
    with pytest.raises(InvalidData, match="add_gaussian_noise_: tensors"):
        add_gaussian_noise_(tensors, 1.0, sensitivity=1.0)


def test_a_read_only_array_and_bad_parameters_are_refused() -> None:
    frozen = np.zeros(3)
    frozen.setflags(write=False)
    with pytest.raises(InvalidData, match="writable"):
        add_gaussian_noise_(frozen, 1.0, sensitivity=1.0)
    for std, sensitivity in ((0.0, 1.0), (1.0, -1.0), (math.inf, 1.0), (True, 1.0)):
        with pytest.raises(InvalidParameter):
            add_gaussian_noise_(torch.zeros(2), std, sensitivity=sensitivity)


def test_a_diverged_gradient_writes_nothing() -> None:
    """A NaN in the second tensor is refused before the first one is written."""
    first, second = torch.zeros(3), torch.tensor([1.0, math.nan])
    with pytest.raises(InvalidData, match="not finite"):
        add_gaussian_noise_([first, second], 1.0, sensitivity=1.0)
    assert bool((first == 0).all())
