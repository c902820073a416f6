"""BatchNorm folding (utilscope.measure.folding): the forms timm uses, the ones that must stay unfolded, and the
refusal of a fold that would change the outputs. Tiny CPU models with non-trivial statistics; closed-form counts."""

from __future__ import annotations

import timm.layers
import torch
import torch.nn.functional as F
from conftest import randomized
from torch import nn

from utilscope.measure import folding
from utilscope.measure.backends import fold_batchnorm
from utilscope.measure.precision import Precision, math_mode


class FunctionalNorm(nn.BatchNorm2d):
    """timm's BatchNormAct2d in miniature: F.batch_norm with keyword arguments, after a check of x.ndim."""

    def forward(self, x):
        torch._assert(x.ndim == 4, "4D input")
        x = F.batch_norm(
            x,
            self.running_mean,
            self.running_var,
            weight=self.weight,
            bias=self.bias,
            training=False,
            momentum=0.1,
            eps=self.eps,
        )
        return torch.relu(x)


class Mixed(nn.Module):
    """Four BatchNorms: one module after a conv, one functional after timm's Conv2dSame (padding from the input's
    shape), one before a conv (pre-activation) and one after a weight-standardized conv; only the first two fold."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = timm.layers.Conv2dSame(8, 8, 3, stride=2), FunctionalNorm(8)
        self.pre, self.conv3 = nn.BatchNorm2d(8), nn.Conv2d(8, 8, 1)
        self.conv4, self.bn4 = timm.layers.StdConv2d(8, 8, 1), nn.BatchNorm2d(8)

    def forward(self, x):
        x = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return self.bn4(self.conv4(self.conv3(self.pre(x))))


def test_fold_handles_functional_batchnorm_and_same_padding_convs():
    model, x = randomized(Mixed()), torch.randn(2, 3, 15, 15)
    folded, folds = folding.fold(model)
    assert [fold.conv_target for fold in folds] == ["conv1", "conv2"]
    assert (folding.count_batchnorm(model), folding.count_batchnorm(folded)) == (4, 2)
    assert folding.fold_difference(model, folded, folds, x) < 1e-12
    with torch.no_grad():
        torch.testing.assert_close(folded(x.double()), model.double()(x.double()), rtol=1e-12, atol=1e-12)
    assert isinstance(model.bn2, FunctionalNorm)  # the original keeps its own


def test_fold_difference_sees_a_wrong_fold():
    model, x = randomized(Mixed()), torch.randn(2, 3, 15, 15)
    folded, folds = folding.fold(model)
    with torch.no_grad():
        folded.conv2.weight.mul_(1.001)
    assert 1e-4 < folding.fold_difference(model, folded, folds, x) < 1e-2


def test_fold_batchnorm_notes_what_it_leaves():
    model, x = randomized(Mixed()), torch.randn(2, 3, 15, 15)
    with math_mode(Precision.FP32):  # as advise and the sweeps call it: the TF32 flags set by the new API
        folded, notes = fold_batchnorm(model, x)
    why = "not after a foldable convolution, or in a module tracing cannot follow"
    assert notes == (f"2 of 4 BatchNorm layers left unfolded ({why})",)
    torch.testing.assert_close(folded(x), model(x), rtol=1e-4, atol=1e-5)


class ShapeDependent(nn.Module):
    """A block whose forward branches on its input's shape, as MobileViT-V2's do: symbolic tracing cannot follow it."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)

    def forward(self, x):
        if x.shape[-1] % 2:
            x = F.pad(x, (0, 1, 0, 1))
        return self.bn(self.conv(x))


def test_fold_keeps_an_untraceable_block_whole_and_folds_the_rest():
    model = randomized(nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), ShapeDependent()))
    x = torch.randn(2, 3, 15, 15)
    folded, folds = folding.fold(model)
    assert [fold.conv_target for fold in folds] == ["0"] and folding.count_batchnorm(folded) == 1
    assert folding.fold_difference(model, folded, folds, x) < 1e-12
    with torch.no_grad():
        torch.testing.assert_close(folded(x.double()), model.double()(x.double()), rtol=1e-12, atol=1e-12)


class SharedOutput(nn.Module):
    """The conv's output feeds the BatchNorm and the residual sum: folding would change the sum."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4)

    def forward(self, x):
        y = self.conv(x)
        return self.bn(y) + y


def test_fold_leaves_a_conv_whose_output_is_used_elsewhere():
    model = randomized(SharedOutput())
    folded, folds = folding.fold(model)
    assert folds == [] and folding.count_batchnorm(folded) == 1


def test_fold_batchnorm_refuses_a_fold_that_changes_outputs(monkeypatch):
    model, x = randomized(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))), torch.randn(2, 3, 8, 8)
    monkeypatch.setattr(folding, "fold_difference", lambda *args: 0.5)
    folded, notes = fold_batchnorm(model, x)
    assert folded is model
    assert notes == ("BatchNorm folding changed the outputs (relative difference 0.5): left unfolded",)
