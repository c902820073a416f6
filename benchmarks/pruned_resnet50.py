"""A structurally pruned ResNet-50: timm's resnet50 with every conv, BatchNorm and classifier-input width x 0.7,
not rounded (64 -> 44, 256 -> 179, 2048 -> 1433), as channel pruning leaves a network. Random weights. The
`advise` validation's unaligned model (docs/advise.md):

    utilscope advise benchmarks/pruned_resnet50.py:build --batch 1,256
"""

import timm
from torch import nn

RESOLUTION = 224
KEEP = 0.7


def pruned(channels: int) -> int:
    return channels if channels == 3 else int(channels * KEEP)


def build() -> nn.Module:
    model = timm.create_model("resnet50", pretrained=False)
    for name, module in list(model.named_modules()):
        parent, _, leaf = name.rpartition(".")
        owner = model.get_submodule(parent) if parent else model
        if isinstance(module, nn.Conv2d):
            conv = nn.Conv2d(
                pruned(module.in_channels),
                pruned(module.out_channels),
                module.kernel_size,
                module.stride,
                module.padding,
                bias=module.bias is not None,
            )
            setattr(owner, leaf, conv)
        elif isinstance(module, nn.BatchNorm2d):
            setattr(owner, leaf, nn.BatchNorm2d(pruned(module.num_features)))
        elif isinstance(module, nn.Linear):
            setattr(owner, leaf, nn.Linear(pruned(module.in_features), module.out_features))
    return model.eval()
