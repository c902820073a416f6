"""benchmarks/timm_same_work.py on the CPU, its three sides stubbed: rounds of --chunk models, each round's rows
printed and appended to the CSV as it ends, so a call cut after a round keeps that round."""

from __future__ import annotations

import csv

from conftest import load_script


def stub_side(calls: list):
    """timm's side at 100 samples/s and then 110 (its two runs), ours at 126: a ratio of 1.2 to timm's mean."""

    def side(which: str, script: str, models: list[str]) -> list[dict]:
        calls.append((which, tuple(models)))
        timm_runs = sum(1 for name, _ in calls if name == "timm")
        rate = 126.0 if which == "ours" else (100.0 if timm_runs % 2 else 110.0)
        return [
            {"model": m, "samples_per_s": rate, "batch": 1024, "error": "ok" if which == "ours" else ""} for m in models
        ]

    return side


def test_the_sides_run_in_rounds_and_each_round_is_appended_to_the_csv(tmp_path, monkeypatch, capsys):
    module = load_script("benchmarks/timm_same_work.py")
    calls: list = []
    monkeypatch.setattr(module, "side", stub_side(calls))
    monkeypatch.setattr(module, "environment", lambda: {"gpu": "stub"})
    models = ["timm:a@224", "timm:b@224", "timm:c@288", "timm:d@224", "timm:e@224"]
    argv = ["timm_same_work.py", "--timm-benchmark", "benchmark.py", "--out", str(tmp_path), "--chunk", "2", *models]
    monkeypatch.setattr("sys.argv", argv)
    assert module.main() == 0
    rounds = [tuple(models[0:2]), tuple(models[2:4]), tuple(models[4:])]
    assert calls == [(which, r) for r in rounds for which in ("timm", "ours", "timm")]
    with open(tmp_path / "timm_same_work.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["model"] for row in rows] == models  # one header, every round's rows in order
    assert all(float(row["ours_over_timm"]) == 126.0 / 105.0 and row["errors"] == "" for row in rows)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == '{"gpu": "stub"}' and len(printed) == 1 + len(models)
    assert printed[1].split() == ["timm:a@224", "100.0", "110.0", "126.0", "1.200"]
