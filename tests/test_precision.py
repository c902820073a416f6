"""The precision table: names, tensors' dtypes, bytes per element, and the names each layer accepts."""

from __future__ import annotations

import pytest
import torch

from utilscope.counting import DTYPES
from utilscope.counting.counter import check_dtype
from utilscope.errors import UsageError
from utilscope.hardware import PRECISIONS, normalize_precision
from utilscope.measure.precision import math_mode, parse_precision
from utilscope.precision import COUNTED, MEASURED, Precision
from utilscope.torch_flags import _tf32_settings


def test_dtypes_and_bytes_per_element():
    dtypes = {p.value: (p.dtype, p.bytes_per_element, p.count_dtype, p.unit.value, p.autocast_dtype) for p in Precision}
    assert dtypes == {
        "fp32": (torch.float32, 4, "fp32", "fp32", None),
        "tf32": (torch.float32, 4, "fp32", "tf32", None),  # fp32 tensors, TF32 math
        "fp16": (torch.float16, 2, "fp16", "fp16", None),
        "bf16": (torch.bfloat16, 2, "bf16", "bf16", None),
        "int8": (torch.int8, 1, "int8", "int8", None),
        "amp": (torch.float32, 4, "fp16", "fp16", torch.float16),  # fp32 weights, autocast to fp16
        "amp_bf16": (torch.float32, 4, "bf16", "bf16", torch.bfloat16),
    }


def test_amp_is_looked_up_as_its_math_unit():
    assert [normalize_precision(p) for p in ("amp", "AMP_BF16", Precision.AMP, "tf32")] == [
        "fp16",
        "bf16",
        "fp16",
        "tf32",
    ]


def test_each_layer_accepts_its_subset_in_canonical_order():
    assert list(DTYPES.items()) == [("fp32", torch.float32), ("fp16", torch.float16), ("bf16", torch.bfloat16)]
    assert [p.value for p in COUNTED] == list(DTYPES)
    assert list(PRECISIONS) == ["fp32", "tf32", "fp16", "bf16", "int8"]
    assert [parse_precision(p.value) for p in MEASURED] == list(MEASURED)
    assert [p.value for p in MEASURED] == ["fp32", "tf32", "fp16", "bf16", "amp", "amp_bf16"]
    assert all(p.count_dtype in DTYPES for p in MEASURED)  # every measured precision can be counted


@pytest.mark.parametrize(
    ("check", "text", "message"),
    [
        (parse_precision, "int8", "unknown precision 'int8'; use one of: fp32, tf32, fp16, bf16, amp, amp_bf16"),
        (parse_precision, "FP16", "unknown precision 'FP16'; use one of: fp32, tf32, fp16, bf16, amp, amp_bf16"),
        (check_dtype, "tf32", "unknown dtype 'tf32'; use one of: fp32, fp16, bf16"),
        (
            normalize_precision,
            "fp8",
            "unknown precision 'fp8'; choose one of: fp32, tf32, fp16, bf16, int8, amp, amp_bf16",
        ),
    ],
)
def test_unknown_names_are_usage_errors_listing_the_choices(check, text, message):
    with pytest.raises(UsageError) as caught:
        check(text)
    assert str(caught.value) == message


def test_math_mode_allows_tf32_for_tf32_and_amp_only_and_restores():
    def tf32_on() -> bool:
        return all(getattr(owner, name) == on for owner, name, on, _ in _tf32_settings())

    before = [getattr(owner, name) for owner, name, *_ in _tf32_settings()]
    seen = {}
    for precision in Precision:
        with math_mode(precision):
            seen[precision.value] = tf32_on()
    assert seen == {
        "fp32": False,
        "tf32": True,
        "fp16": False,
        "bf16": False,
        "int8": False,
        "amp": True,
        "amp_bf16": True,
    }
    assert [getattr(owner, name) for owner, name, *_ in _tf32_settings()] == before
