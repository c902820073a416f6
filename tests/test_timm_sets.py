"""The rule that sorts timm architectures into CNNs and the rest, the shipped table it built, and the named sets."""

import pytest
from torch import nn

from utilscope.cli import main
from utilscope.counting import architecture, count
from utilscope.errors import UsageError
from utilscope.models import sets as model_sets
from utilscope.models import timm_sets
from utilscope.survey.plan import select_models


class TinyAttention(nn.Module):
    """A 1x1 conv (3 -> 4 channels, no bias) and one attention over the 8x8 positions."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Conv2d(3, 4, 1, bias=False)

    def forward(self, x):
        tokens = self.embed(x).flatten(2).transpose(1, 2)  # [B, 64, 4]
        weights = (tokens @ tokens.transpose(1, 2)).softmax(-1)
        return (weights @ tokens).mean(1)


class GlobalContext(nn.Module):
    """GCNet's pooling: a 1x1 conv to one map, softmax over the positions, [C, HW] @ [HW, 1]."""

    def __init__(self):
        super().__init__()
        self.embed, self.mask = nn.Conv2d(3, 4, 3, bias=False), nn.Conv2d(4, 1, 1, bias=False)

    def forward(self, x):
        x = self.embed(x)
        weights = self.mask(x).flatten(2).softmax(-1).transpose(1, 2)  # [B, HW, 1]
        return x.flatten(2) @ weights


def test_attention_share_counts_the_matmuls_of_activations_to_a_matrix():
    result = count(TinyAttention(), resolution=8)
    conv, matmuls = 2 * 3 * 4 * 64, 2 * (2 * 64 * 64 * 4)
    assert architecture.attention_share(result) == pytest.approx(matmuls / (matmuls + conv))
    pooled = count(GlobalContext(), resolution=8)
    assert pooled.total.flops > 0 and architecture.attention_share(pooled) == 0.0


@pytest.mark.parametrize(
    "layer, mixes",
    [
        (nn.Conv2d(3, 8, 3), True),
        (nn.Conv2d(3, 8, 16, stride=16), False),
        (nn.Conv2d(3, 8, 1), False),
        (nn.Conv2d(3, 8, 7, stride=4), True),
        (nn.Conv1d(3, 8, 3), True),
        (nn.Conv2d(3, 8, (1, 3)), True),
        (nn.Linear(3, 8), False),
    ],
)
def test_a_conv_mixes_space_when_its_kernel_is_larger_than_one_and_its_stride(layer, mixes):
    assert architecture.mixes_space(nn.Sequential(nn.Identity(), layer)) is mixes


@pytest.mark.parametrize(
    "share, spatial, kind",
    [(0.0, True, "cnn"), (0.001, True, "attention"), (0.5, False, "attention"), (0.0, False, "no_spatial_conv")],
)
def test_the_kind_follows_the_attention_share_then_the_spatial_convs(share, spatial, kind):
    assert architecture.kind_of(share, spatial)[0] == kind


def test_the_shipped_table_holds_every_architecture_once_with_a_kind():
    frame = timm_sets.table()
    assert frame["model"].is_unique and set(frame["kind"]) <= set(timm_sets.KINDS)
    kinds = dict(zip(frame["model"], frame["kind"], strict=True))
    expected = {
        "resnet50": "cnn",
        "convnext_tiny": "cnn",
        "gcresnet50t": "cnn",
        "efficientnet_b0": "cnn",
        "vit_base_patch16_224": "attention",
        "botnet26t_256": "attention",
        "coatnet_0_rw_224": "attention",
        "vit_large_patch32_224": "attention",
        "mobilevit_s": "attention",
        "fastvit_sa12": "attention",
        "mixer_b16_224": "no_spatial_conv",
        "resmlp_12_224": "no_spatial_conv",
    }
    assert {name: kinds[f"timm:{name}"] for name in expected} == expected
    cnn = frame[frame["kind"] == "cnn"]
    assert (cnn["gflops"] > 0).all() and (cnn["resolution"] > 0).all()
    assert (frame.loc[frame["kind"] == "failed", "reason"] != "").all()
    import timm

    if timm.__version__ == model_sets.timm_version():
        assert set(frame["model"]) == {f"timm:{name}" for name in timm.list_models()}


def test_the_named_sets():
    cnn = model_sets.set_members("timm-cnn")
    assert cnn == timm_sets.members("cnn") and len(cnn) > 400
    popular = model_sets.set_members("timm-cnn-popular")
    facts = timm_sets.table().set_index("model").loc[popular]
    assert len(popular) == 150 and set(popular) <= set(cnn)
    assert facts["pretrained_tags"].is_monotonic_decreasing and facts["pretrained_tags"].iloc[-1] >= 1
    reference = model_sets.set_members("timm-reference")
    assert all(timm_sets.facts(model)["kind"] != "cnn" for model in reference)
    assert model_sets.set_members("survey") == model_sets.default_survey()
    assert select_models([], [], ["timm-reference"]) == reference
    with pytest.raises(UsageError, match="unknown model set 'nope'; use one of: survey, representative, timm-cnn"):
        model_sets.set_members("nope")


def test_models_lists_a_set_with_resolution_and_gflops(capsys):
    assert main(["models", "--set", "timm-reference"]) == 0
    out, err = capsys.readouterr()
    rows = [line.split("\t") for line in out.splitlines()]
    assert len(rows) == 15 and rows[2][:2] == ["timm:vit_base_patch16_224", "224"]
    assert float(rows[2][2]) == pytest.approx(timm_sets.facts("timm:vit_base_patch16_224")["gflops"], rel=1e-3)
    assert err.startswith("15 models: transformers")
    assert main(["models", "--set", "nope"]) == 2
    assert "unknown model set 'nope'" in capsys.readouterr().err


def test_a_set_of_torchvision_models_is_counted_when_listed(capsys, monkeypatch):
    monkeypatch.setattr(model_sets, "set_members", lambda name: ["torchvision:alexnet"])
    assert main(["models", "--set", "survey"]) == 0
    model, resolution, gflops = capsys.readouterr().out.split()
    assert (model, resolution) == ("torchvision:alexnet", "224") and float(gflops) == pytest.approx(1.43, abs=0.01)


def test_the_protocols_split_follows_the_sha256_of_the_family_name():
    # sha256("ResNet") starts c7e2ccb0 (0 mod 4): test; sha256("EfficientNet") starts 1aaf351b (3 mod 4): validation
    assert model_sets.family_split("timm:resnet50") == model_sets.family_split("timm:resnet18") == "test"
    assert model_sets.family_split("timm:efficientnet_b0") == "validation"
    assert model_sets.family_split("torchvision:resnet50") == "validation"  # only timm families are split


def test_a_timm_module_s_models_show_under_the_family_most_of_its_models_take_and_keep_their_split_family():
    # CoAtNet and AIMv2 match no glob: family_of gives their timm module, the report the module's usual family
    assert model_sets.family_of("timm:coatnet_0_224") == "maxxvit"
    assert (
        model_sets.display_family("timm:coatnet_0_224")
        == "MaxViT"
        == model_sets.display_family("timm:maxvit_tiny_tf_224")
    )
    assert model_sets.display_family("timm:aimv2_large_patch14_224") == "ViT"
    assert model_sets.display_family("timm:resnet50") == model_sets.family_of("timm:resnet50") == "ResNet"
    # the split follows family_of ("maxxvit"), never the display name: sha256 of each decides apart
    assert model_sets.family_split("timm:coatnet_0_224") == split_of("maxxvit")


def split_of(family: str) -> str:
    import hashlib

    return "test" if int(hashlib.sha256(family.encode()).hexdigest()[:8], 16) % 4 == 0 else "validation"
