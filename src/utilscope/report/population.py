"""Findings over a population of surveyed models (the timm survey): distributions, extremes, family medians, the
design choices that go with high or low utilization, speed at equal FLOPs, agreement with another store, and what
one backend gains over another on the same models.

Every function takes the exported measurements (``utilscope export``: one row per cell) and, for design choices,
the table of ``counting.design`` features (``scripts/build_timm_design.py``), and returns a DataFrame. Only ``ok``
rows count. A design choice is compared two ways: the median utilization of the models that have it, and the median
*size-matched ratio*, each model's utilization over what a log-log fit of utilization on GFLOPs/sample predicts for
its size, because bigger models use more of the GPU whatever their design.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from utilscope.report import families, plots

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)


def ok_cells(frame: pd.DataFrame, backend: str | None = None, batch: int | None = None) -> pd.DataFrame:
    """The ok rows (of one backend and batch when given), with ``gflops`` per sample and the ``name`` in its source."""
    rows = families.with_current_families(plots.ok_rows(frame))
    if backend is not None:
        rows = rows[rows["backend"] == backend]
    if batch is not None:
        rows = rows[rows["batch"] == batch]
    return rows.assign(gflops=rows["flops_per_sample"] / 1e9, name=rows["model"].str.split(":", n=1).str[-1])


def distribution(frame: pd.DataFrame) -> pd.DataFrame:
    """Per backend and batch: models measured, utilization quantiles and the largest."""
    rows = ok_cells(frame)
    grouped = rows.groupby(["backend", "batch"])["utilization"]
    table = grouped.quantile(list(QUANTILES)).unstack()
    table.columns = [f"p{round(q * 100)}" for q in QUANTILES]
    return pd.concat([grouped.size().rename("models"), table, grouped.max().rename("max")], axis=1).reset_index()


def extremes(frame: pd.DataFrame, backend: str, batch: int, count: int = 10, best: bool = True) -> pd.DataFrame:
    """The ``count`` models with the highest (``best``) or lowest utilization at one backend and batch."""
    rows = ok_cells(frame, backend, batch).sort_values("utilization", ascending=not best).head(count)
    return rows[["name", "family", "resolution", "gflops", "utilization", "samples_per_s"]].reset_index(drop=True)


def family_medians(frame: pd.DataFrame, backend: str, batch: int, min_models: int = 3) -> pd.DataFrame:
    """Per family with at least ``min_models`` models: their count and median utilization, best first."""
    rows = ok_cells(frame, backend, batch)
    grouped = rows.groupby("family")
    table = pd.DataFrame(
        {
            "models": grouped.size(),
            "median_utilization": grouped["utilization"].median(),
            "median_gflops": grouped["gflops"].median(),
        }
    )
    table = table[table["models"] >= min_models]
    return table.sort_values("median_utilization", ascending=False).reset_index()


def size_fit(rows: pd.DataFrame):
    """The fit ``log u = a + b log GFLOPs`` of the rows, as a function of GFLOPs returning the utilization their
    size predicts."""
    slope, intercept = np.polyfit(np.log(rows["gflops"].to_numpy()), np.log(rows["utilization"].to_numpy()), 1)
    return lambda gflops: np.exp(intercept + slope * np.log(np.asarray(gflops, dtype=float)))


def size_matched_ratio(rows: pd.DataFrame) -> pd.Series:
    """Each row's utilization over the fit ``log u = a + b log GFLOPs`` of all the rows (1.0: as its size predicts)."""
    return rows["utilization"] / size_fit(rows)(rows["gflops"].to_numpy())


def against_population(frame: pd.DataFrame, others: pd.DataFrame, backend: str, batch: int) -> pd.DataFrame:
    """Each model of ``others`` (the transformers and hybrids beside the CNNs) at one backend and batch: its
    utilization, the share of ``frame``'s models below it, and its utilization over what the population's log-log fit
    of utilization on GFLOPs predicts for its size (the CNNs' size-matched ratio, applied to an outsider)."""
    rows, theirs = ok_cells(frame, backend, batch), ok_cells(others, backend, batch)
    population = np.sort(rows["utilization"].to_numpy())
    utilization = theirs["utilization"].to_numpy()
    table = theirs[["name", "family", "resolution", "gflops", "utilization"]].assign(
        population_below=np.searchsorted(population, utilization) / len(population),
        size_matched=utilization / size_fit(rows)(theirs["gflops"].to_numpy()),
    )
    return table.sort_values("utilization", ascending=False).reset_index(drop=True)


def design_groups(design: pd.DataFrame) -> pd.DataFrame:
    """The design choices as categories, one column each: conv style, squeeze-excite, activation, channel
    alignment, stem, resolution, re-parameterizable blocks, depth and width (halves of the population)."""
    conv = np.select(
        [design["depthwise_share"] >= 0.01, design["grouped_share"] >= 0.1], ["depthwise", "grouped"], "dense"
    )
    return pd.DataFrame(
        {
            "model": design["model"],
            "conv style": conv,
            "squeeze-excite": np.where(design["squeeze_excite"], "yes", "no"),
            "activation": design["activation"],
            "channels aligned to 8": np.where(design["aligned_share"] >= 0.99, ">= 99% of FLOPs", "< 99% of FLOPs"),
            "stem": np.where(design["patchify_stem"], "patchify", "overlapping conv"),
            "input resolution": pd.cut(
                design["resolution"], [0, 224, 320, 10_000], labels=["<= 224", "225-320", "> 320"]
            ),
            "re-parameterizable blocks": np.where(design["reparameterizable"], "yes", "no"),
            "depth": np.where(design["depth"] > design["depth"].median(), "deeper half", "shallower half"),
            "width": np.where(design["width"] > design["width"].median(), "wider half", "narrower half"),
        }
    )


def _with_design(frame: pd.DataFrame, design: pd.DataFrame, backend: str, batch: int):
    """The ok rows of one backend and batch with their size-matched ``ratio`` and design choices, and the choices."""
    rows, groups = ok_cells(frame, backend, batch), design_groups(design)
    return rows.assign(ratio=size_matched_ratio(rows)).merge(groups, on="model"), groups


def design_effects(frame: pd.DataFrame, design: pd.DataFrame, backend: str, batch: int) -> pd.DataFrame:
    """Per design choice and value: models, median utilization, median GFLOPs and median size-matched ratio."""
    rows, groups = _with_design(frame, design, backend, batch)
    parts = []
    for choice in groups.columns.drop("model"):
        grouped = rows.groupby(choice, observed=True)
        table = pd.DataFrame(
            {
                "choice": choice,
                "models": grouped.size(),
                "median_utilization": grouped["utilization"].median(),
                "median_gflops": grouped["gflops"].median(),
                "size_matched": grouped["ratio"].median(),
            }
        )
        parts.append(table.rename_axis("value").reset_index())
    return pd.concat(parts, ignore_index=True)[
        ["choice", "value", "models", "median_utilization", "median_gflops", "size_matched"]
    ]


def design_effects_within(
    frame: pd.DataFrame, design: pd.DataFrame, backend: str, batch: int, within: str = "conv style", min_models: int = 5
) -> pd.DataFrame:
    """The other design choices' median size-matched ratio inside each value of ``within`` (by default the conv
    style, which most choices go with: squeeze-excite and SiLU are mostly in depthwise networks), so that a choice
    is compared between models of the same kind. A value with fewer than ``min_models`` models in a group is left
    empty; one row per choice and value, two columns (models, size_matched) per group."""
    rows, groups = _with_design(frame, design, backend, batch)
    parts = []
    for choice in groups.columns.drop(["model", within]):
        grouped = rows.groupby([choice, within], observed=True)["ratio"]
        table = pd.DataFrame({"models": grouped.size(), "size_matched": grouped.median()}).reset_index()
        table.loc[table["models"] < min_models, "size_matched"] = np.nan
        wide = table.pivot(index=choice, columns=within, values=["models", "size_matched"])
        wide.columns = [f"{group} {measure}" for measure, group in wide.columns]
        parts.append(wide.rename_axis("value").reset_index().assign(choice=choice))
    table = pd.concat(parts, ignore_index=True)
    order = [f"{group} {measure}" for group in sorted(rows[within].unique()) for measure in ("models", "size_matched")]
    table = table.reindex(columns=["choice", "value", *order])
    models = [c for c in order if c.endswith("models")]
    table[models] = table[models].fillna(0).astype(int)
    return table


def equal_flops_pairs(frame: pd.DataFrame, backend: str, batch: int, tolerance: float = 0.05) -> pd.DataFrame:
    """Every pair of models of different families whose GFLOPs/sample differ by at most ``tolerance``, with the
    throughput ratio fast / slow; the largest ratios first."""
    rows = ok_cells(frame, backend, batch).sort_values("gflops").reset_index(drop=True)
    gflops = rows["gflops"].to_numpy()
    ends = np.searchsorted(gflops, gflops * (1 + tolerance), side="right")  # past the last model within tolerance
    first = np.repeat(np.arange(len(rows)), np.maximum(ends - np.arange(len(rows)) - 1, 0))
    second = np.concatenate([np.arange(i + 1, end) for i, end in enumerate(ends)] or [np.array([], dtype=int)])
    keep = rows["family"].to_numpy()[first] != rows["family"].to_numpy()[second]
    a, b = rows.iloc[first[keep]].reset_index(drop=True), rows.iloc[second[keep]].reset_index(drop=True)
    a_faster = a["samples_per_s"].to_numpy() >= b["samples_per_s"].to_numpy()

    def side(column: str, fast: bool) -> np.ndarray:  # the fast (or slow) model's value of each pair
        return np.where(a_faster == fast, a[column].to_numpy(), b[column].to_numpy())

    pairs = pd.DataFrame(
        {
            "fast": side("name", True),
            "fast_family": side("family", True),
            "fast_gflops": side("gflops", True),
            "slow": side("name", False),
            "slow_family": side("family", False),
            "slow_gflops": side("gflops", False),
            "ratio": side("samples_per_s", True) / side("samples_per_s", False),
        }
    )
    columns = ["fast", "fast_family", "fast_gflops", "slow", "slow_family", "slow_gflops", "ratio"]
    return pairs[columns].sort_values("ratio", ascending=False).reset_index(drop=True)


def family_wins(pairs: pd.DataFrame, min_ratio: float = 1.5) -> pd.DataFrame:
    """Per family: equal-FLOP pairs of at least ``min_ratio`` it wins and loses, most wins first."""
    strong = pairs[pairs["ratio"] >= min_ratio]
    table = pd.DataFrame({"wins": strong["fast_family"].value_counts(), "losses": strong["slow_family"].value_counts()})
    table = table.fillna(0).astype(int).rename_axis("family").reset_index()
    return table.sort_values(["wins", "losses"], ascending=[False, True]).reset_index(drop=True)


def agreement(frame: pd.DataFrame, other: pd.DataFrame, pairs: dict[str, str]) -> pd.DataFrame:
    """The same architectures in two stores (``pairs``: model id here -> model id there), cell by cell (backend,
    batch): resolution and GFLOPs on both sides and the utilization and throughput ratios here / there."""
    here, there = ok_cells(frame), ok_cells(other)
    there = there[there["model"].isin(pairs.values())]
    here = here[here["model"].isin(pairs)].assign(other_model=lambda rows: rows["model"].map(pairs))
    keys = ["backend", "batch", "precision"]
    joined = here.merge(there, left_on=["other_model", *keys], right_on=["model", *keys], suffixes=("", "_other"))
    return (
        pd.DataFrame(
            {
                "model": joined["name"],
                "other": joined["name_other"],
                "backend": joined["backend"],
                "batch": joined["batch"],
                "resolution": joined["resolution"],
                "other_resolution": joined["resolution_other"],
                "gflops": joined["gflops"],
                "other_gflops": joined["gflops_other"],
                "utilization_ratio": joined["utilization"] / joined["utilization_other"],
                "throughput_ratio": joined["samples_per_s"] / joined["samples_per_s_other"],
            }
        )
        .sort_values(["backend", "batch", "model"])
        .reset_index(drop=True)
    )


def backend_gains(frame: pd.DataFrame, backend: str, over: str, batch: int) -> pd.DataFrame:
    """Per model measured on both backends at ``batch``: its utilization on each and the throughput ratio
    ``gain`` (``backend`` / ``over``), largest gain first. A store of one device and software (the timm survey's)
    has one row per model, backend and batch; rows of several settings of a model would be paired each with each."""
    keys = ["model", "precision", "resolution"]
    here, there = ok_cells(frame, backend, batch), ok_cells(frame, over, batch)
    joined = here.merge(there[[*keys, "utilization", "samples_per_s"]], on=keys, suffixes=("", "_over"))
    table = pd.DataFrame(
        {
            "name": joined["name"],
            "model": joined["model"],
            "family": joined["family"],
            "gflops": joined["gflops"],
            "utilization_over": joined["utilization_over"],
            "utilization": joined["utilization"],
            "gain": joined["samples_per_s"] / joined["samples_per_s_over"],
        }
    )
    return table.sort_values("gain", ascending=False).reset_index(drop=True)


def gains_by_design(gains: pd.DataFrame, design: pd.DataFrame) -> pd.DataFrame:
    """``backend_gains`` summarized: over all models, then per design choice and value, the models and the
    quartiles of the gain."""
    groups = design_groups(design)
    rows = gains.merge(groups, on="model")
    parts = [rows.assign(choice="all", value="all models")]
    parts += [rows.assign(choice=choice, value=rows[choice].astype(str)) for choice in groups.columns.drop("model")]
    grouped = pd.concat(parts).groupby(["choice", "value"], sort=False)["gain"]
    table = grouped.quantile([0.25, 0.5, 0.75]).unstack()
    table.columns = ["p25_gain", "median_gain", "p75_gain"]
    return pd.concat([grouped.size().rename("models"), table], axis=1).reset_index()
