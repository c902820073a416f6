"""The precision table: names, tensors' dtypes, bytes per element, and the names each layer accepts."""

from __future__ import annotations

import pytest
import torch

from utilscope.counting import DTYPES
from utilscope.counting.counter import check_dtype
from utilscope.errors import UsageError
from utilscope.hardware import PRECISIONS, normalize_precision
from utilscope.measure.precision import parse_precision
from utilscope.precision import COUNTED, MEASURED, Precision


def test_dtypes_and_bytes_per_element():
    dtypes = {p.value: (p.dtype, p.bytes_per_element, p.count_dtype) for p in Precision}
    assert dtypes == {
        "fp32": (torch.float32, 4, "fp32"),
        "tf32": (torch.float32, 4, "fp32"),  # fp32 tensors, TF32 math
        "fp16": (torch.float16, 2, "fp16"),
        "bf16": (torch.bfloat16, 2, "bf16"),
        "int8": (torch.int8, 1, "int8"),
    }


def test_each_layer_accepts_its_subset_in_canonical_order():
    assert list(DTYPES.items()) == [("fp32", torch.float32), ("fp16", torch.float16), ("bf16", torch.bfloat16)]
    assert [p.value for p in COUNTED] == list(DTYPES)
    assert list(PRECISIONS) == ["fp32", "tf32", "fp16", "bf16", "int8"]
    assert [parse_precision(p.value) for p in MEASURED] == [Precision.FP32, Precision.TF32, Precision.FP16,
                                                            Precision.BF16]  # fmt: skip
    assert all(p.count_dtype in DTYPES for p in MEASURED)  # every measured precision can be counted


@pytest.mark.parametrize(
    ("check", "text", "message"),
    [
        (parse_precision, "int8", "unknown precision 'int8'; use one of: fp32, tf32, fp16, bf16"),
        (parse_precision, "FP16", "unknown precision 'FP16'; use one of: fp32, tf32, fp16, bf16"),
        (check_dtype, "tf32", "unknown dtype 'tf32'; use one of: fp32, fp16, bf16"),
        (normalize_precision, "fp8", "unknown precision 'fp8'; choose one of: fp32, tf32, fp16, bf16, int8"),
    ],
)
def test_unknown_names_are_usage_errors_listing_the_choices(check, text, message):
    with pytest.raises(UsageError) as caught:
        check(text)
    assert str(caught.value) == message
