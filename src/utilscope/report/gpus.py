"""Several GPUs in one store (one survey per GPU type): which GPUs to compare, the reference GPU, and each compared
cell side by side. Plain functions returning DataFrames; ``gpu_plots`` draws them and ``html`` lays them out.

Rules, so the comparison never mixes configurations silently:
- the compared GPUs are the devices with successful rows; the **reference** is the one with the most successful rows
  (ties by name), listed first;
- each GPU contributes its main configuration (the software label and memory format with the most successful rows);
  rows of its other configurations are counted (``comparison_rows``) and left out;
- the batch sizes compared are the smallest and the largest with successful rows on two or more GPUs;
- a cell a GPU has no row for is ``"not measured"`` there, a failed row is ``"oom"`` / ``"error"``: never dropped.
Utilization is each row's own: against its GPU's peak (``peak_tflops``, ``peak_source``).
"""

from __future__ import annotations

import pandas as pd

from utilscope.errors import UsageError
from utilscope.report import plots

COMPARED = ["model", "resolution", "precision", "backend", "batch"]  # one compared cell
NOT_MEASURED = "not measured"
RATIO = "samples_per_s_ratio"  # samples/s of a GPU / samples/s of the reference GPU on the same cell
UNKNOWN_PEAK = "measured ceiling"  # how a peak_source starts when the GPU has no datasheet peak


def compared_devices(measurements: pd.DataFrame) -> list[str]:
    """The devices with successful rows, the reference first: most successful rows first, ties by name."""
    counts = plots.ok_rows(measurements)["device"].astype(str).value_counts()
    return sorted(counts.index, key=lambda device: (-counts[device], device))


def _configuration_labels(frame: pd.DataFrame) -> pd.Series:
    columns = [c for c in ("software", "memory_format") if c in frame.columns]
    if not columns:
        return pd.Series("", index=frame.index)
    return frame[columns].astype(str).agg(" | ".join, axis=1)


def comparison_rows(measurements: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """The rows of each compared device in its main configuration, and per device the number of its rows measured in
    other configurations (left out of the comparison; devices without such rows are not named)."""
    devices = compared_devices(measurements)
    frame = measurements.assign(device=measurements["device"].astype(str))
    frame = frame[frame["device"].isin(devices)]
    if not devices:
        return frame, {}
    labels = _configuration_labels(frame)
    kept, left_out = [], {}
    for device in devices:
        mine = frame["device"] == device
        counts = labels[mine & (frame["status"] == "ok")].value_counts()
        main = min(counts.index, key=lambda label: (-counts[label], label))
        chosen = mine & (labels == main)
        kept.append(frame[chosen])
        if (mine & ~chosen).any():
            left_out[device] = int((mine & ~chosen).sum())
    return pd.concat(kept), left_out


def compared_batches(rows: pd.DataFrame) -> list[int]:
    """Of the batch sizes with successful rows on two or more devices, the smallest and the largest (one when they
    are the same, none when no batch has two devices)."""
    shared = plots.ok_rows(rows).groupby("batch")["device"].nunique()
    batches = sorted(int(batch) for batch in shared[shared >= 2].index)
    return sorted({batches[0], batches[-1]}) if batches else []


def gpu_comparison(measurements: pd.DataFrame, batches: list[int] | None = None) -> pd.DataFrame:
    """One row per compared cell (index ``COMPARED``) at ``batches`` (default ``compared_batches``); columns
    ``(device, field)``, the reference device first, with fields ``status`` (ok / oom / error / not measured),
    ``utilization`` and ``samples_per_s`` (NaN unless ok) and, for the other devices, ``RATIO``.

    Rows are sorted by batch, precision, backend, then by utilization on the reference (missing last) and model.
    Raises ``UsageError`` when fewer than two devices have successful rows.
    """
    devices = compared_devices(measurements)
    if len(devices) < 2:
        raise UsageError(f"a GPU comparison needs successful rows of two devices or more; found {devices or 'none'}")
    rows, _ = comparison_rows(measurements)
    batches = compared_batches(rows) if batches is None else [int(b) for b in batches]
    rows = rows[rows["batch"].isin(batches)].drop_duplicates(COMPARED + ["device"])
    rows = rows.assign(status=rows["status"].map(plots.status_kind))
    index = pd.MultiIndex.from_frame(rows[COMPARED].drop_duplicates())
    columns: dict[tuple[str, str], pd.Series] = {}
    for device in devices:
        mine = rows[rows["device"] == device].set_index(COMPARED).reindex(index)
        ok = mine["status"] == "ok"
        columns[(device, "status")] = mine["status"].fillna(NOT_MEASURED)
        columns[(device, "utilization")] = mine["utilization"].astype(float).where(ok)
        columns[(device, "samples_per_s")] = mine["samples_per_s"].astype(float).where(ok)
        if device != devices[0]:
            columns[(device, RATIO)] = columns[(device, "samples_per_s")] / columns[(devices[0], "samples_per_s")]
    table = pd.DataFrame(columns, index=index)
    keys = index.to_frame(index=False).assign(reference=table[(devices[0], "utilization")].to_numpy())
    order = keys.sort_values(
        ["batch", "precision", "backend", "reference", "model"],
        ascending=[True, True, True, False, True],
        na_position="last",
    ).index
    return table.iloc[order]


def median_ratios(comparison: pd.DataFrame) -> pd.DataFrame:
    """Per batch and non-reference device: the median samples/s ratio to the reference over the cells measured
    successfully on both (``cells``)."""
    found = []
    for device in dict.fromkeys(comparison.columns.get_level_values(0)):
        if (device, RATIO) not in comparison.columns:
            continue
        ratios = comparison[(device, RATIO)]
        for batch, values in ratios.groupby(level="batch"):
            found.append(dict(batch=int(batch), device=device, cells=int(values.notna().sum()), median=values.median()))
    return pd.DataFrame(found, columns=["batch", "device", "cells", "median"])


def device_peaks(rows: pd.DataFrame) -> dict[str, list[tuple[str, float, str]]]:
    """Per device of the successful rows: its ``(precision, peak_tflops, peak_source)`` triples, by precision."""
    ok = plots.ok_rows(rows)
    peaks = ok.assign(device=ok["device"].astype(str))[["device", "precision", "peak_tflops", "peak_source"]]
    peaks = peaks.drop_duplicates().sort_values(["device", "precision", "peak_tflops"])
    found: dict[str, list[tuple[str, float, str]]] = {}
    for device, precision, peak, source in peaks.itertuples(index=False):
        found.setdefault(device, []).append((str(precision), float(peak), "" if pd.isna(source) else str(source)))
    return found


def unknown_peak(source: str) -> bool:
    """True when the peak is the measured GEMM ceiling because the GPU has no datasheet peak."""
    return str(source).startswith(UNKNOWN_PEAK)
