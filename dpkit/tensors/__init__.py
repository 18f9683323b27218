"""Mechanisms on tensors: torch (CPU and CUDA), CuPy, JAX and other array-API arrays.

A mechanism given such an array returns the same type, on the same device, with the dtype its
docs state (:mod:`dpkit.tensors.libraries`). Host arrays run dpkit's numpy path on a zero-copy
view; accelerator arrays run on the device (:mod:`dpkit.tensors.bits`), with secure randomness
— a ChaCha20 keystream computed there (:mod:`dpkit.tensors.chacha`), keyed from the operating
system's CSPRNG — unless a fast generator is passed (:mod:`dpkit.tensors.device_random`).
"""

from dpkit.tensors.libraries import ArrayLibrary, array_library

__all__ = ["ArrayLibrary", "array_library"]
