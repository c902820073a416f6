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
        "fp32": (torch.float32, 4, "fp32", "tf32", None),  # PyTorch's default: convolutions on the TF32 units
        "fp32_strict": (torch.float32, 4, "fp32", "fp32", None),  # no TF32 anywhere
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


def test_a_unit_name_is_its_unit_and_a_precision_its_units():
    """ "fp32" names the fp32 units (a datasheet's column); the precision fp32 is PyTorch's default, whose
    convolutions run on the TF32 units; fp32_strict runs on the fp32 units."""
    assert [normalize_precision(p) for p in ("fp32", Precision.FP32, "fp32_strict", Precision.FP32_STRICT)] == [
        "fp32",
        "tf32",
        "fp32",
        "fp32",
    ]
    assert Precision.FP32.unit_among({"fp32": 15.7, "fp16": 125}) == "fp32"  # a V100: no TF32 unit
    assert Precision.FP32.unit_among({"fp32": 66.9, "tf32": 494.7}) == "tf32"
    assert Precision.AMP.unit_among({}) == "fp16"
    assert [Precision(p).tf32_switches for p in ("fp32", "fp32_strict", "tf32", "fp16", "amp")] == [
        (False, True),  # PyTorch's defaults: matmuls in IEEE fp32, cuDNN convolutions in TF32
        (False, False),
        (True, True),
        (False, False),
        (True, True),
    ]


def test_each_layer_accepts_its_subset_in_canonical_order():
    assert list(DTYPES.items()) == [("fp32", torch.float32), ("fp16", torch.float16), ("bf16", torch.bfloat16)]
    assert [p.value for p in COUNTED] == list(DTYPES)
    assert list(PRECISIONS) == ["fp32", "tf32", "fp16", "bf16", "int8"]
    assert [parse_precision(p.value) for p in MEASURED] == list(MEASURED)
    assert [p.value for p in MEASURED] == ["fp32", "fp32_strict", "tf32", "fp16", "bf16", "amp", "amp_bf16"]
    assert all(p.count_dtype in DTYPES for p in MEASURED)  # every measured precision can be counted


@pytest.mark.parametrize(
    ("check", "text", "message"),
    [
        (
            parse_precision,
            "int8",
            "unknown precision 'int8'; use one of: fp32, fp32_strict, tf32, fp16, bf16, amp, amp_bf16",
        ),
        (
            parse_precision,
            "FP16",
            "unknown precision 'FP16'; use one of: fp32, fp32_strict, tf32, fp16, bf16, amp, amp_bf16",
        ),
        (check_dtype, "tf32", "unknown dtype 'tf32'; use one of: fp32, fp16, bf16"),
        (
            normalize_precision,
            "fp8",
            "unknown precision 'fp8'; choose one of: fp32, fp32_strict, tf32, fp16, bf16, int8, amp, amp_bf16",
        ),
    ],
)
def test_unknown_names_are_usage_errors_listing_the_choices(check, text, message):
    with pytest.raises(UsageError) as caught:
        check(text)
    assert str(caught.value) == message


def test_math_mode_sets_each_precisions_tf32_switches_and_restores():
    def tf32_on() -> tuple[bool, bool]:
        matmul, conv = (getattr(owner, name) == on for owner, name, on, _ in _tf32_settings())
        return matmul, conv

    before = [getattr(owner, name) for owner, name, *_ in _tf32_settings()]
    seen = {}
    for precision in Precision:
        with math_mode(precision):
            seen[precision.value] = tf32_on()
    assert seen == {
        "fp32": (False, True),
        "fp32_strict": (False, False),
        "tf32": (True, True),
        "fp16": (False, False),
        "bf16": (False, False),
        "int8": (False, False),
        "amp": (True, True),
        "amp_bf16": (True, True),
    }
    assert [getattr(owner, name) for owner, name, *_ in _tf32_settings()] == before
