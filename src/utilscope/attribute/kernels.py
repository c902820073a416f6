"""Kernel families: what a CUDA kernel's name says it does (cuDNN/CUTLASS convolutions, GEMMs, Triton, ...)."""

from __future__ import annotations

import re

FAMILIES = (  # first match wins: inductor's Triton kernels carry fused op names such as "convolution"
    ("triton", re.compile(r"^triton", re.IGNORECASE)),
    ("convolution", re.compile(r"conv(?!ert)|implicit_gemm|fprop|dgrad|wgrad|winograd", re.IGNORECASE)),
    ("gemm", re.compile(r"gemm|cutlass|cublas|xmma|nvjet", re.IGNORECASE)),
    ("attention", re.compile(r"fmha|flash|attention", re.IGNORECASE)),
    ("batchnorm", re.compile(r"batch_norm|bn_fw", re.IGNORECASE)),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled", re.IGNORECASE)),
)
ANCHOR_FAMILIES = frozenset({"convolution", "gemm", "attention"})  # tensor-core work: each starts a fused region


def kernel_family(name: str) -> str:
    return next((family for family, pattern in FAMILIES if pattern.search(name)), "other")
