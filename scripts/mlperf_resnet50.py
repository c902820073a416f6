"""Write data/public/mlperf/resnet50_inference.csv from MLCommons' MLPerf Inference results repositories.

Usage: python3 scripts/mlperf_resnet50.py ROUND=GIT_DIR [ROUND=GIT_DIR ...] -o data/public/mlperf/resnet50_inference.csv
       (GIT_DIR: a clone, bare or not, of github.com/mlcommons/inference_results_<ROUND>, e.g. v4.1=/tmp/v41.git)

One row per (round, submitter, system, scenario) of the closed division's ResNet-50 Offline and Server results
(``closed/<submitter>/results/<system>/resnet50/<scenario>/performance/run_1/mlperf_log_summary.txt``) whose system
(``closed/<submitter>/systems/<system>.json``) is a datacenter system with GPUs. The published numbers are copied as
text from the log, never rounded or converted; ``samples_per_s_per_gpu_derived`` is the one computed column (the
round's published result ÷ accelerators per node × nodes). The systems left out (CPU-only, edge, accelerators that
are not GPUs) are printed on stderr with the reason. Reads the repository with ``git``; writes only the CSV.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
from decimal import Decimal

REPO = "mlcommons/inference_results_{round}"
SCENARIOS = ("Offline", "Server")
SUMMARY = re.compile(
    r"^closed/([^/]+)/results/([^/]+)/resnet50/(Offline|Server)/performance/run_1/mlperf_log_summary\.txt$"
)
# the log line that is each round's published result (the submission checker's RESULT_FIELD_NEW: since v4.0 the
# Server result is the completed, not the scheduled, samples per second)
RESULT_LINE = {"Offline": "Samples per second", "Server": "Completed samples per second"}
# accelerator_model_name as the system JSON writes it -> utilscope spec-table key (hardware/specs.toml)
GPU_KEYS = {
    "NVIDIA H100-SXM-80GB": "h100_sxm",
    "NVIDIA H100-PCIe-80GB": "h100_pcie",
    "NVIDIA H100-NVL-94GB": "h100_nvl",
    "NVIDIA H200-SXM-141GB": "h200_sxm",
    "NVIDIA GH200 Grace Hopper Superchip 96GB": "gh200",
    "NVIDIA L40S": "l40s",
    "NVIDIA L4": "l4",
    "NVIDIA A100-SXM-80GB": "a100_sxm4_80gb",
    "NVIDIA A100-PCIe-80GB": "a100_pcie_80gb",
}
GPU_WORDS = re.compile(r"NVIDIA|GPU|Instinct|\bMI\d{3}|Radeon", re.IGNORECASE)
COLUMNS = [
    "round", "repo", "commit", "submitter", "system", "system_name", "scenario", "validity", "result_metric",
    "samples_per_s", "scheduled_samples_per_s", "completed_samples_per_s", "accelerator_model_name",
    "accelerators_per_node", "number_of_nodes", "accelerators", "gpu", "samples_per_s_per_gpu_derived",
    "unit", "system_type", "host_processor_model_name", "host_processors_per_node", "framework",
    "other_software_stack", "input_data_types", "weight_data_types", "precision", "runtime", "result_path",
    "system_path", "measurements_path",
]  # fmt: skip


def git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True, text=True).stdout


def log_value(text: str, name: str) -> str:
    """The text after ``name :`` in a log summary, "" when the line is absent."""
    match = re.search(rf"^{re.escape(name)}\s*:\s*(\S+)\s*$", text, re.MULTILINE)
    return match.group(1) if match else ""


def measurement_types(git_dir: str, paths: set[str], base: str) -> tuple[str, str, str]:
    """(input_data_types, weight_data_types, path) of the scenario's measurements JSON, empty when it has none."""
    for path in sorted(p for p in paths if p.startswith(base) and p.endswith(".json")):
        facts = json.loads(git(git_dir, "show", f"HEAD:{path}"))
        if "input_data_types" in facts or "weight_data_types" in facts:
            return facts.get("input_data_types", ""), facts.get("weight_data_types", ""), path
    return "", "", ""


def system_rows(round_name: str, git_dir: str, left_out: list[str]) -> list[dict]:
    commit = git(git_dir, "rev-parse", "HEAD").strip()
    paths = set(git(git_dir, "ls-tree", "-r", "--name-only", "HEAD").splitlines())
    rows = []
    for path in sorted(paths):
        match = SUMMARY.match(path)
        if not match:
            continue
        submitter, system, scenario = match.groups()
        system_path = f"closed/{submitter}/systems/{system}.json"
        facts = json.loads(git(git_dir, "show", f"HEAD:{system_path}"))
        accelerator = str(facts.get("accelerator_model_name", "")).strip()
        where = f"{round_name} {submitter}/{system} {scenario}"
        if "datacenter" not in str(facts.get("system_type", "")):
            left_out.append(f"{where}: system_type {facts.get('system_type')!r}, not datacenter")
            continue
        if not GPU_WORDS.search(accelerator):
            left_out.append(f"{where}: accelerator {accelerator!r}, not a GPU")
            continue
        log = git(git_dir, "show", f"HEAD:{path}")
        per_node, nodes = int(facts["accelerators_per_node"]), int(facts.get("number_of_nodes") or 1)
        published = log_value(log, RESULT_LINE[scenario])
        base = f"closed/{submitter}/measurements/{system}/resnet50/{scenario}/"
        inputs, weights, measurements = measurement_types(git_dir, paths, base)
        rows.append(
            {
                "round": round_name,
                "repo": REPO.format(round=round_name),
                "commit": commit,
                "submitter": submitter,
                "system": system,
                "system_name": facts.get("system_name", ""),
                "scenario": scenario,
                "validity": log_value(log, "Result is"),
                "result_metric": RESULT_LINE[scenario],
                "samples_per_s": published,
                "scheduled_samples_per_s": log_value(log, "Scheduled samples per second"),
                "completed_samples_per_s": log_value(log, "Completed samples per second"),
                "accelerator_model_name": accelerator,
                "accelerators_per_node": per_node,
                "number_of_nodes": nodes,
                "accelerators": per_node * nodes,
                "gpu": GPU_KEYS.get(accelerator, ""),
                "samples_per_s_per_gpu_derived": f"{Decimal(published) / (per_node * nodes):.2f}",
                "unit": "samples/s",
                "system_type": facts.get("system_type", ""),
                "host_processor_model_name": facts.get("host_processor_model_name", ""),
                "host_processors_per_node": facts.get("host_processors_per_node", ""),
                "framework": facts.get("framework", ""),
                "other_software_stack": facts.get("other_software_stack", ""),
                "input_data_types": inputs,
                "weight_data_types": weights,
                "precision": "int8" if inputs == weights == "int8" else "",
                "runtime": "tensorrt" if "tensorrt" in str(facts.get("framework", "")).lower() else "",
                "result_path": path,
                "system_path": system_path,
                "measurements_path": measurements,
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rounds", nargs="+", metavar="ROUND=GIT_DIR")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    rows, left_out = [], []
    for pair in args.rounds:
        round_name, _, git_dir = pair.partition("=")
        rows += system_rows(round_name, git_dir, left_out)
    with open(args.output, "w", newline="") as handle:
        writer = csv.DictWriter(handle, COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    unmatched = sorted({row["accelerator_model_name"] for row in rows if not row["gpu"]})
    print(f"{len(rows)} rows written to {args.output}; GPUs without a spec-table key: {unmatched or 'none'}")
    print(f"{len(left_out)} results left out:", *left_out, sep="\n  ", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
