"""The array methods of every mechanism and estimator: other libraries' host arrays arrive as
zero-copy numpy views and results go back as the caller's type; an accelerator's array reaches
only a class that declares a device path; attrs's slotted subclasses keep ``super()``."""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from support import device_reference  # noqa: E402
from support.recorder import SEEN, Recorder  # noqa: E402

import dpkit  # noqa: E402
from dpkit.errors import InvalidData  # noqa: E402


@attrs.frozen
class Child(Recorder):
    name: ClassVar[str] = "child"

    def randomize(self, values: Any, /, *, rng: Any = None) -> Any:
        out, _ = super().randomize(values, rng=rng)
        return out * 10


def test_a_host_tensor_arrives_as_a_zero_copy_numpy_view_and_goes_back_as_a_tensor() -> None:
    SEEN.clear()
    x = torch.tensor([1, 2, 3])
    out, note = Recorder().randomize(x)
    assert isinstance(SEEN[0], np.ndarray) and np.shares_memory(SEEN[0], x.numpy())
    assert isinstance(out, torch.Tensor) and out.tolist() == [2, 3, 4] and note == "note"


def test_super_in_an_attrs_subclass_still_works_with_tensors_and_numpy() -> None:
    assert Child().randomize(torch.tensor([1])).tolist() == [20]
    assert Child().randomize(np.array([1])).tolist() == [20]


def test_an_accelerator_array_reaches_only_a_declared_device_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    device_reference.on_device(monkeypatch)
    with pytest.raises(InvalidData, match=r"recorder\.randomize has no device path yet") as e:
        Recorder().randomize(torch.tensor([0, 1]))
    assert e.value.field == "values"
    SEEN.clear()
    monkeypatch.setattr(Recorder, "device_methods", frozenset({"randomize"}))
    Recorder().randomize(torch.tensor([0, 1]))
    assert isinstance(SEEN[0], torch.Tensor)  # the method itself got the device array


def test_a_torch_generator_becomes_a_seeded_numpy_generator_on_the_host_path() -> None:
    krr = dpkit.mechanism("krr", epsilon=1.0, k=3)
    x = torch.zeros(50, dtype=torch.int64)
    a = krr.randomize(x, rng=torch.Generator().manual_seed(1))
    b = krr.randomize(x, rng=torch.Generator().manual_seed(1))
    assert isinstance(a, torch.Tensor) and torch.equal(a, b)
