"""The survey report: figures of a store's measurements and a self-contained HTML page around them."""

from utilscope.report.figures import Figure, Kind
from utilscope.report.gpu_plots import plot_gpu_comparison
from utilscope.report.gpus import gpu_comparison
from utilscope.report.html import batch_summary, build_report, failures, nvml_summary, ranked_models
from utilscope.report.plots import plot_op_class_shares, plot_utilization_by_family

__all__ = [
    "Figure",
    "Kind",
    "batch_summary",
    "build_report",
    "failures",
    "gpu_comparison",
    "nvml_summary",
    "plot_gpu_comparison",
    "plot_op_class_shares",
    "plot_utilization_by_family",
    "ranked_models",
]
