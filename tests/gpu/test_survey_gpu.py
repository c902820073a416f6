"""A survey on the GPU end to end: worker subprocess, rows keyed by their configuration, op classes attributed with
the cells' cuDNN settings (run on the lent H200; skipped without CUDA)."""

from __future__ import annotations

import pytest
import torch

from utilscope.measure.settings import CudnnSettings
from utilscope.survey.executors import run_survey
from utilscope.survey.plan import SurveyGrid, plan_survey
from utilscope.survey.runner import RunOptions
from utilscope.survey.store import Store

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_a_gpu_survey_stores_its_configuration_in_columns(tmp_path):
    db = tmp_path / "results.sqlite"
    cudnn = CudnnSettings(benchmark_limit=3, depthwise_heuristic=True)
    grid = SurveyGrid(("torchvision:mobilenet_v3_small",), (1, 32), ("fp16",), ("graph",), cudnn=cudnn)
    with Store(db) as store:
        plan = plan_survey(grid, store)
    options = RunOptions(str(db), min_time_ms=300.0, attribute_models=frozenset({"torchvision:mobilenet_v3_small"}))
    result = run_survey(plan, options)
    assert result.failed_cells == 0
    with Store(db) as store:
        frame, op_classes = store.frame(), store.op_class_frame()
        assert plan_survey(grid, store).cells == 0  # resumes with nothing left
    assert list(frame["status"]) == ["ok", "ok"] and frame["cuda_graph"].all()
    assert (frame["cudnn_benchmark_limit"] == 3).all() and frame["cudnn_depthwise_heuristic"].all()
    assert frame["driver"].str.len().gt(0).all() and frame["cudnn"].str.len().gt(0).all()
    assert frame["software"].str.endswith("cudnn.benchmark_limit 3 · depthwise heuristic").all()
    assert len(op_classes) > 0 and (op_classes["batch"] == 32).all()
    assert (op_classes["cudnn_benchmark_limit"] == 3).all() and op_classes["cudnn_depthwise_heuristic"].all()
