"""scripts/validate_precisions.py: a cell is its model at its stored resolution, predicted at that resolution."""

from __future__ import annotations

import pandas as pd
from conftest import load_script

SCRIPT = "scripts/validate_precisions.py"


def rows(*cells: tuple[int, float]) -> pd.DataFrame:
    """One model's ok rows at (resolution, samples/s), batch 256, amp on NCHW, eager."""
    common = {"model": "timm:net", "batch": 256, "precision": "amp", "memory_format": "contiguous"}
    return pd.DataFrame(
        [
            {
                **common,
                "resolution": res,
                "backend": "eager",
                "device": "NVIDIA H200",
                "samples_per_s": sps,
                "unstable": 0,
            }
            for res, sps in cells
        ]
    )


def test_a_model_at_two_resolutions_is_two_cells_each_predicted_at_its_own(monkeypatch):
    script = load_script(SCRIPT)
    stores = {"a": rows((224, 900.0), (288, 500.0)), "b": rows((224, 1000.0))}
    monkeypatch.setattr(script, "measured", lambda store: (stores[store], "h200_sxm"))
    kept, gpu = script.fastest(["a", "b"])
    assert gpu == "h200_sxm"
    assert sorted(zip(kept["resolution"], kept["samples_per_s"], kept["timings"], strict=True)) == [
        (224, 1000.0, 2),
        (288, 500.0, 1),
    ]

    asked = []

    class Prediction:
        def __init__(self, resolution):
            self.resolution, self.profile_path = resolution, "profiles/h100_amp_graph.json"

        def to_frame(self):  # 4 samples/s per pixel of side: a closed form of the resolution asked for
            row = {"model": "timm:net", "batch": 256, "samples_per_s": 4.0 * self.resolution, "bound": "tensor"}
            return pd.DataFrame([row])

    def predict(models, **options):
        asked.append(options["resolution"])
        return Prediction(options["resolution"])

    monkeypatch.setattr(script.api, "predict", predict)
    out = script.predicted(kept, "h200_sxm").sort_values("resolution")
    assert sorted(asked) == [224, 288]
    assert list(out["samples_per_s_predicted"]) == [896.0, 1152.0]
    assert list(out["error"]) == [896.0 / 1000.0 - 1, 1152.0 / 500.0 - 1]


def test_a_repeat_store_is_compared_cell_by_cell_with_the_first(monkeypatch):
    script = load_script(SCRIPT)
    stores = {
        "first": rows((224, 1000.0), (256, 500.0), (288, 400.0)),
        "again": rows((224, 1050.0), (256, 250.0), (320, 90.0)),  # the 320 px cell is not in the first
    }
    monkeypatch.setattr(script, "measured", lambda store: (stores[store], "h200_sxm"))
    table = script.repeat_spread(["first", "again"]).splitlines()
    assert len(table) == 3  # header, rule, one condition and batch
    # two cells timed by both: ratios 1.05 and 0.5; median 0.775, one of two within ±10%
    assert table[2] == "| again | amp | contiguous | eager | 256 | 2 | 0.775 | 50% | 0.50–1.05 |"


def test_the_host_bound_rows_are_scored_apart_from_the_device_bound_ones():
    script = load_script(SCRIPT)
    scored = rows((224, 100.0), (256, 100.0), (288, 100.0)).assign(
        bound=["host", "memory", "tensor"], error=[-0.20, 0.05, -0.15]
    )
    table = script.bound_table(scored).splitlines()
    assert table[2:] == [
        "| amp | contiguous | eager | 256 | device | 2 | 10.0% | -5.0% | 50% |",
        "| amp | contiguous | eager | 256 | host | 1 | 20.0% | -20.0% | 0% |",
    ]


def test_a_host_profile_given_predicts_the_eager_rows_with_it_and_no_other(monkeypatch):
    script = load_script(SCRIPT)
    both = pd.concat([rows((224, 900.0)), rows((224, 800.0)).assign(backend="graph")], ignore_index=True)
    hosts = {}

    class Prediction:
        profile_path = "profiles/h200_amp_graph.json"

        def to_frame(self):
            return pd.DataFrame([{"model": "timm:net", "batch": 256, "samples_per_s": 1000.0, "bound": "host"}])

    def predict(models, **options):
        hosts[options["backend"]] = options["host_profile"]
        return Prediction()

    monkeypatch.setattr(script.api, "predict", predict)
    script.predicted(both, "h200_sxm", host="mine.json")
    assert hosts == {"eager": "mine.json", "graph": None}  # a host profile is eager's alone
