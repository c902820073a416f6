"""A host profile's grouped-conv kernel table (``HostProfile.conv_kernels``) from a sweep of
``benchmarks/host_conv_groups.py`` timed on a machine of the same GPU and software, for a host profile timed before
``calibrate --host`` counted them itself (docs/predict.md, "Eager: the host side").

The sweep's grouped rows (2 or more groups of 2 or more channels; batch 1, cuDNN's heuristics: ``cudnn_benchmark``
False) become the table's rows: group width, groups, size and kernels a call. The host's microseconds a kernel beyond
a call's first: the median over the sweep's split rows of their host time less the median of its one-kernel rows,
over their extra kernels, carried to the profile's host by the ratio of the two hosts' one-kernel conv calls (the
profile's ``conv`` and ``module`` kinds, as an ``nn.Conv2d`` call costs them, over the sweep's one-kernel median).

    python3 scripts/attach_conv_kernels.py SWEEP.csv HOST.json --source "WHERE THE SWEEP RAN" [--out FILE]

Writes the host profile with the table (to HOST.json unless ``--out``) and prints its numbers.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace

import pandas as pd

from utilscope.predict.host import MODULE, load_host


def table_rows(sweep: pd.DataFrame) -> list[dict]:
    """The sweep's grouped rows of batch 1 and cuDNN's heuristics as ``conv_kernels`` rows."""
    rows = sweep[~sweep["cudnn_benchmark"].astype(bool)]
    if "batch" in rows:
        rows = rows[rows["batch"] == 1]
    width = pd.to_numeric(rows["group_width"].astype(str).str.split().str[0], errors="coerce")
    grouped = rows.assign(width=width).dropna(subset=["width", "kernels_a_call"])
    grouped = grouped[(grouped["width"] >= 2) & (grouped["groups"] >= 2)]
    return [
        {"group_width": int(r.width), "groups": int(r.groups), "size": int(r.size), "kernels": round(r.kernels_a_call)}
        for r in grouped.itertuples()
    ]


def kernel_us(sweep: pd.DataFrame) -> tuple[float, float]:
    """The sweep host's microseconds a kernel beyond a call's first, and its one-kernel conv call's (medians)."""
    one = sweep.loc[sweep["kernels_a_call"] == 1, "host_us"].median()
    split = sweep[sweep["kernels_a_call"] > 1]
    extra = (split["host_us"] - one) / (split["kernels_a_call"] - 1)
    return float(statistics.median(extra)), float(one)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep")
    parser.add_argument("host")
    parser.add_argument("--source", required=True, help="where the sweep ran: GPU, cuDNN, date, file")
    parser.add_argument("--out", help="write here (default: the host profile itself)")
    args = parser.parse_args(argv)
    sweep, host = pd.read_csv(args.sweep), load_host(args.host)
    per_kernel_us, one_us = kernel_us(sweep)
    profile_us = host.call_us["conv"] + host.call_us[MODULE]
    rows = table_rows(sweep)
    source = (
        f"{args.source}; {per_kernel_us:.2f} us a kernel there x {profile_us:.1f} / {one_us:.1f} us for a one-kernel "
        "conv call here and there"
    )
    attached = replace(
        host, conv_kernels=tuple(rows), split_kernel_us=per_kernel_us * profile_us / one_us, kernels_source=source
    )
    path = attached.save(args.out or args.host)
    split = sum(row["kernels"] > 1 for row in rows)
    print(f"{path}: {len(rows)} grouped convs, {split} of them split; {attached.split_kernel_us:.2f} us a kernel")


if __name__ == "__main__":
    main()
