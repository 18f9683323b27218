"""The fused CUDA kernels in Triton's interpreter on the CPU (Triton is in the test extra on
Linux x86-64, the platform of its wheels; elsewhere this skips): they draw exactly the
documented words of the portable ChaCha20 and Philox, in both layouts; the raw keystream kernel
gives ChaCha20's stream across the 32-bit counter word; the packed and coo graphs, a band of
rows at a time, draw the dense graph's words. The same comparisons run on a real GPU in
test_cuda.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

SCRIPT = """
import numpy as np, torch
import dpkit
from dpkit.tensors import bits
from dpkit.tensors.device_random import DeviceWords
from dpkit.tensors.libraries import array_library
from support import device_reference as reference

key, threshold = tuple(range(1, 9)), 1 << 31
x = torch.randint(0, 2, (5000,), dtype=torch.uint8)
library = array_library(x, owner="t")
out = bits._flip_bits_fused(x, DeviceWords(library, mode="keyed", key=key), threshold,
                            owner="t", field="v")
words = reference.fused_bits_words(key, x.numel(), bits._LANES)
assert np.array_equal(out.numpy(), x.numpy() ^ (words < threshold)), "bits"
n = 90
upper = torch.triu(torch.rand(n, n) < 0.3, 1).to(torch.uint8)
adjacency = upper + upper.T
out = bits._flip_graph_fused(adjacency, DeviceWords(library, mode="keyed", key=key), threshold,
                             owner="t", field="a")
words = reference.fused_graph_words(key, n, bits._TILE)
expected = np.triu(adjacency.numpy() ^ (words < threshold), 1)
assert np.array_equal(out.numpy(), expected + expected.T), "graph"
fast = bits._flip_bits_fused(torch.zeros(4096, dtype=torch.uint8),
                             DeviceWords(library, mode="fast", seed=3), threshold,
                             owner="t", field="v")
assert 1700 < int(fast.sum()) < 2400, "fast"  # Binomial(4096, 1/2): |z| > 10.9 has p < 1e-26
# The packed and coo layouts, a 64-row band at a time, draw the dense kernel's words.
bits._fused, bits._BAND_ELEMENTS = (lambda library, values: True), 1
device = library.__class__(library.xp, library.name, library.device, on_host=False)
for secure in (True, False):
    rng = (lambda: dpkit.SecureRandom.from_key(bytes(32))) if secure else (
        lambda: np.random.default_rng(8))
    def run(output):
        return bits.flip_graph(device, adjacency, threshold64=1 << 62, rng=rng(), owner="t",
                               field="a", output=output)
    dense = run("dense").numpy()
    assert np.array_equal(np.unpackbits(run("packed").numpy(), axis=1, count=n), dense), "packed"
    rows, cols = run("coo")
    assert np.array_equal(np.stack([rows.numpy(), cols.numpy()]), np.nonzero(np.triu(dense, 1)))
# The raw keystream kernel, across the 32-bit counter word.
import array_api_compat.numpy as xnp
from dpkit.tensors import _kernels
from dpkit.tensors.chacha import chacha20_words, key_words
words32 = key_words(bytes(range(32)))
key_tensor = torch.tensor([w - 2**32 if w >= 2**31 else w for w in words32], dtype=torch.int32)
stream = torch.empty(16 * 40, dtype=torch.int64)
_kernels.keystream_kernel[(3,)](key_tensor, stream, 2**32 - 5, 40, LANES=16)
expected = np.stack(chacha20_words(xnp, words32, 2**32 - 5, 40), axis=1).reshape(-1)
assert np.array_equal(stream.numpy(), expected), "keystream"
print("ok")
"""


def test_fused_kernels_draw_the_documented_words_in_the_interpreter() -> None:
    root = Path(__file__).resolve().parents[3]
    env = {"TRITON_INTERPRET": "1", "PYTHONPATH": str(root / "tests")}
    import os

    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
