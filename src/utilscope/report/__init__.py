"""The survey report: figures of a store's measurements and a self-contained HTML page around them."""

from utilscope.report.gpu_plots import plot_gpu_comparison
from utilscope.report.gpus import gpu_comparison
from utilscope.report.html import batch_summary, build_report, failures, nvml_summary, ranked_models
from utilscope.report.plots import (
    plot_flop_vs_nvml,
    plot_op_class_shares,
    plot_throughput_vs_gflops,
    plot_utilization_by_family,
    plot_utilization_vs_batch,
    plot_utilization_vs_gflops,
)

__all__ = [
    "batch_summary",
    "build_report",
    "failures",
    "gpu_comparison",
    "nvml_summary",
    "plot_flop_vs_nvml",
    "plot_gpu_comparison",
    "plot_op_class_shares",
    "plot_throughput_vs_gflops",
    "plot_utilization_by_family",
    "plot_utilization_vs_batch",
    "plot_utilization_vs_gflops",
    "ranked_models",
]
