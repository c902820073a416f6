"""present.markdown.family_errors: a validation's errors per family, as docs/predict.md shows them."""

from __future__ import annotations

import pandas as pd

from utilscope.present.markdown import family_errors


def test_the_family_table_has_a_line_per_family_with_each_batch_and_counts_the_families_within_target():
    errors = {  # model -> (error at batch 1, error at batch 256)
        "torchvision:resnet18": (0.05, 0.02),
        "torchvision:resnet50": (-0.20, 0.08),
        "torchvision:vgg11": (0.10, -0.30),
    }
    scored = pd.DataFrame(
        [
            {"backend": "eager", "model": model, "batch": batch, "error": pair[i]}
            for model, pair in errors.items()
            for i, batch in enumerate((1, 256))
        ]
    )
    lines = family_errors(scored, {"backend": "backend"}).splitlines()
    assert lines[0] == "| backend | family | networks | batch 1: MAPE (within ±10%) | batch 256: MAPE (within ±10%) |"
    # ResNet: |0.05| and |-0.20| at batch 1 (mean 12.5%, one of two within), |0.02| and |0.08| at 256
    assert lines[2] == "| eager | ResNet | 2 | 12.5% (50%) | 5.0% (100%) |"
    assert lines[3] == "| eager | VGG | 1 | 10.0% (100%) | 30.0% (0%) |"  # ±10% itself is within
    assert lines[5:] == [
        "eager, batch 1: 1 of 2 families ≥ 90% within ±10%",
        "eager, batch 256: 1 of 2 families ≥ 90% within ±10%",
    ]


def test_a_family_not_measured_at_a_batch_shows_a_dash_there():
    scored = pd.DataFrame(
        [
            {"backend": "graph", "model": "torchvision:resnet18", "batch": 1, "error": 0.0},
            {"backend": "graph", "model": "torchvision:resnet18", "batch": 256, "error": 0.0},
            {"backend": "graph", "model": "torchvision:vgg11", "batch": 256, "error": 0.5},
        ]
    )
    lines = family_errors(scored, {"backend": "backend"}).splitlines()
    assert lines[3] == "| graph | VGG | 1 | – | 50.0% (0%) |"
    assert lines[5:] == [
        "graph, batch 1: 1 of 1 families ≥ 90% within ±10%",
        "graph, batch 256: 1 of 2 families ≥ 90% within ±10%",
    ]
