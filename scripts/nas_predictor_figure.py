"""Predicted against measured throughput of the held-out H200 architectures, per space and batch size: the shipped
predictor beside the FLOPs-only proxy (docs/nas.md). One panel per (space, batch), with the line y = x.

Run from the repository root: python3 scripts/nas_predictor_figure.py [--db STORE] [--out PNG]
"""

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from utilscope.nas.table_predictor import (  # noqa: E402
    holdout_estimates,
    load_table_predictor,
    mape,
    measured_dataset,
    shipped_profile,
    usable_rows,
)
from utilscope.survey.store import Store  # noqa: E402

SPACES = ("mbv3", "regnet")
SHOWN = {"predictor": ("predictor", "tab:blue"), "flops_proxy": ("FLOPs proxy (c / FLOPs)", "tab:red")}


def panels(db: str) -> list[tuple[str, int, object]]:
    """(space, batch, held-out estimates) for each space's shipped H200 profile and the store's measurements."""
    with Store(db, create=False) as store:
        frame, records = store.frame(), store.model_records()
    result = []
    for space in SPACES:
        predictor = load_table_predictor(shipped_profile("h200", space))
        archs, measurements = measured_dataset(frame, space, records)
        rows = usable_rows(predictor.table, archs, measurements)
        estimates = holdout_estimates(predictor, archs, rows, set(predictor.holdout_ids))
        result += [(space, int(batch), group) for batch, group in estimates.groupby("batch")]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="data/h200/nas.sqlite")
    parser.add_argument("--out", default="docs/nas-h200/nas_predicted_vs_measured.png")
    args = parser.parse_args()
    shown = panels(args.db)
    figure, axes_row = plt.subplots(1, len(shown), figsize=(4.6 * len(shown), 4.4), squeeze=False)
    for axes, (space, batch, group) in zip(axes_row[0], shown, strict=True):
        measured = group["measured"].to_numpy()
        for column, (label, colour) in SHOWN.items():
            error = mape(group[column].to_numpy(), measured)
            axes.scatter(measured, group[column], s=12, alpha=0.7, color=colour, label=f"{label}: MAPE {error:.1%}")
        low, high = min(measured.min(), group["flops_proxy"].min()), max(measured.max(), group["flops_proxy"].max())
        axes.plot([low, high], [low, high], color="black", linewidth=0.8)
        axes.set(
            title=f"{space}, batch {batch} ({len(group)} held out)",
            xlabel="measured samples/s",
            ylabel="estimated samples/s",
        )
        axes.locator_params(nbins=5)
        axes.legend(fontsize=8, loc="upper left")
        axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
