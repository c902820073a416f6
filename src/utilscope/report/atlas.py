"""The GPU atlas: one frame of every GPU's rows, ours (measured) and others' (published: timm's tables), each with
its condition, so that figures and ``utilscope gpus`` compare like with like. Plain functions returning DataFrames;
``atlas_plots`` draws them and ``html`` lays them out.

Rules, so that rows differing in a condition are never compared silently:
- a row's ``condition`` is its precision, memory layout and backend (``amp · contiguous · eager``); figures compare
  rows of one condition (``MAIN_CONDITION``), the dynamo figure pairs ``compile`` with ``eager`` rows of one table
  family (same GPU, torch, precision, layout);
- per GPU and condition the rows of one source table are used: the newest torch, ours before a published one of
  the same GPU (``chosen_tables``); the others stay in the frame for ``utilscope gpus``;
- a model timm can reparameterize is compared only reparameterized, where that is known: our ``+reparam`` rows, and
  published rows whose GMACs show their run reparameterized it (``reparam`` "yes", ``published.infer_reparam``);
  its plain rows and the published ones that cannot tell are left out (``comparable``);
- utilization is each row's own: counted FLOPs x samples/s over its GPU's datasheet peak for the precision's math
  unit (``Precision.unit``), as ``survey.published.with_utilization`` and the survey compute it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from utilscope import hardware
from utilscope.errors import UsageError
from utilscope.models.zoo import REPARAM
from utilscope.survey.published import with_utilization
from utilscope.versions import torch_key

MEASURED, PUBLISHED = "measured", "published"
OURS = "utilscope survey"  # the table name of measured rows
MAIN_CONDITION = ("amp", "contiguous", "eager")  # timm's published condition: what every GPU has
NON_CNN_CLASSES = ("attention-hybrid",)  # conv classes the atlas's figures show only when asked (not CNNs)
COLUMNS = [
    "gpu",
    "gpu_name",
    "gpu_label",  # the name a published row's source gives its GPU or system; "" for ours
    "architecture",
    "source",
    "table",
    "torch",
    "precision",
    "memory_format",
    "backend",
    "condition",
    "model",
    "resolution",
    "batch",
    "reparam",
    "conv_class",
    "samples_per_s",
    "utilization",
    "achieved_tflops",
    "peak_tflops",
    "flops_per_sample",
    "other_flops_per_sample",  # counted, on published rows (``counted_alike``); NaN on ours
    "bytes_per_sample",
    "intensity",
]


def _gpu_facts(names: pd.Series) -> pd.DataFrame:
    """Spec key, display name and architecture of each GPU name (a key or a CUDA device name, ``find_spec``); an
    unknown GPU keeps its name and an empty architecture."""
    facts = {}
    for name in names.dropna().unique():
        spec = hardware.find_spec(name)
        facts[name] = (spec.key, spec.name, spec.architecture) if spec else (name, name, "")
    rows = [facts.get(name, (name, name, "")) for name in names]
    return pd.DataFrame(rows, index=names.index, columns=["gpu", "gpu_name", "architecture"])


def published_rows(published: pd.DataFrame | None) -> pd.DataFrame:
    """Counted published rows (``Store.published_frame``; None: none) in the atlas's columns."""
    if published is None or published.empty:
        return pd.DataFrame(columns=COLUMNS)
    counted = published[published["count_status"] == "ok"]
    if counted.empty:
        return pd.DataFrame(columns=COLUMNS)
    frame = with_utilization(counted)
    facts = _gpu_facts(frame["gpu"])
    return frame.drop(columns=["gpu"]).join(facts).assign(source=PUBLISHED, table=frame["source_file"])


def measured_rows(measurements: pd.DataFrame, classes: dict[str, str], convertible: set[str]) -> pd.DataFrame:
    """Our successful rows (``Store.frame``) in the atlas's columns: a ``+reparam`` model is the model with
    ``reparam`` "yes", its plain row "no" when the model can be reparameterized (it has a ``+reparam`` row, or is in
    ``convertible``: its published rows say so), else "n/a"; ``classes``: each model's conv class (from its counted
    published rows; "unknown" for a model without one)."""
    ok = measurements[measurements["status"] == "ok"]
    if ok.empty:
        return pd.DataFrame(columns=COLUMNS)
    model = ok["model"].str.removesuffix(REPARAM)
    reparameterized = set(model[ok["model"].str.endswith(REPARAM)]) | convertible
    reparam = (
        ok["model"].str.endswith(REPARAM).map({True: "yes", False: "no"}).where(model.isin(reparameterized), "n/a")
    )
    bytes_per_sample = ok["achieved_gbs"].astype("float64") * 1e9 / ok["samples_per_s"]
    frame = ok.assign(
        model=model,
        reparam=reparam,
        bytes_per_sample=bytes_per_sample,
        source=MEASURED,
        table=OURS,
        gpu_label="",
        conv_class=[classes.get(name, "unknown") for name in model],
    )
    return frame.drop(columns=["device"]).join(_gpu_facts(ok["device"].astype(str)))


def atlas_rows(measurements: pd.DataFrame, published: pd.DataFrame | None) -> pd.DataFrame:
    """Every GPU's rows, measured and published, in ``COLUMNS`` (``condition`` and ``intensity``, FLOPs per byte,
    added)."""
    ours = published_rows(published)
    classes = dict(zip(ours["model"], ours["conv_class"], strict=True)) if not ours.empty else {}
    convertible = set(ours.loc[ours["reparam"] != "n/a", "model"]) if not ours.empty else set()
    frame = pd.concat([measured_rows(measurements, classes, convertible), ours], ignore_index=True)
    if frame.empty:
        return pd.DataFrame(columns=COLUMNS)
    frame["condition"] = condition_of(frame)
    # bytes unknown (an int8 row: utilscope counts no int8 bytes) leave the intensity unknown, NaN
    flops, moved = (
        frame[c].astype("Float64").to_numpy("float64", na_value=np.nan)
        for c in ("flops_per_sample", "bytes_per_sample")
    )
    frame["intensity"] = flops / moved
    return frame[COLUMNS].reset_index(drop=True)


def of_torch(frame: pd.DataFrame, version: str | None) -> pd.DataFrame:
    """The frame with only the published tables of one torch ``version`` ("2.4" matches 2.4.0; None: all), our
    measured rows kept: so that two GPUs' tables are compared on one torch where a GPU has tables of several.
    UsageError naming the published versions when none matches."""
    if version is None:
        return frame
    published = frame["source"] == PUBLISHED
    wanted = torch_key(version)
    matches = published & frame["torch"].map(lambda text: torch_key(text)[: len(wanted)] == wanted)
    if not matches.any():
        known = ", ".join(sorted(set(frame.loc[published, "torch"].astype(str)), key=torch_key)) or "none"
        raise UsageError(f"--torch {version}: no published table of that torch version (the store's: {known})")
    return frame[~published | matches]


def chosen_tables(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of one table per GPU and condition: ours first, else the newest torch (ties by table name)."""
    if frame.empty:
        return frame
    tables = frame[["gpu", "condition", "source", "table", "torch"]].drop_duplicates(["gpu", "condition", "table"])
    order = tables.assign(ours=tables["source"] == MEASURED, version=tables["torch"].map(torch_key))
    order = order.sort_values(["ours", "version", "table"], ascending=[False, False, True])
    best = order.drop_duplicates(["gpu", "condition"])
    keep = frame.set_index(["gpu", "condition", "table"]).index.isin(
        best.set_index(["gpu", "condition", "table"]).index
    )
    return frame[keep]


def comparable(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows alike in reparameterization: models timm cannot reparameterize ("n/a"), and the others' rows known to
    be reparameterized ("yes")."""
    return frame[frame["reparam"].isin(["n/a", "yes"])]


CONDITION_PARTS = ("precision", "memory_format", "backend")  # what a row's ``condition`` joins, in its order


def condition_of(rows: pd.DataFrame) -> pd.Series:
    """Each row's condition as the atlas names it: "amp · contiguous · eager" (``CONDITION_PARTS``)."""
    first, *rest = CONDITION_PARTS
    return rows[first].str.cat([rows[part] for part in rest], sep=" · ")


def is_cnn(rows: pd.DataFrame) -> pd.Series:
    """Which rows are CNNs: not of a ``NON_CNN_CLASSES`` conv class (a measured row without a published one is of
    class "unknown": ours are CNN surveys)."""
    return ~rows["conv_class"].isin(NON_CNN_CLASSES)


def main_rows(frame: pd.DataFrame, condition: tuple[str, str, str] = MAIN_CONDITION) -> pd.DataFrame:
    """The compared rows of one condition: one table per GPU, comparable models only."""
    precision, layout, backend = condition
    rows = frame[(frame["precision"] == precision) & (frame["memory_format"] == layout) & (frame["backend"] == backend)]
    return comparable(chosen_tables(rows))


def gpu_order(frame: pd.DataFrame) -> list[str]:
    """The GPUs of the frame, by their datasheet peak for the main precision (smallest first), then name."""
    peaks = frame.groupby("gpu")["peak_tflops"].max()
    return sorted(peaks.index, key=lambda gpu: (peaks[gpu], gpu))


def rank_correlation(rows: pd.DataFrame, same_batch: bool = False) -> pd.DataFrame:
    """Spearman's rank correlation of samples/s between each pair of GPUs over the (model, resolution) rows both
    have (``main_rows``; ``same_batch``: only those run at one batch on both), NaN below 10 rows; the diagonal
    is 1."""
    wide = _wide(rows, ["model", "resolution"], ["samples_per_s"])
    order = gpu_order(rows)
    matrix = pd.DataFrame(1.0, index=pd.Index(order, name="gpu"), columns=pd.Index(order, name="gpu"))
    for small, big in _pairs_of_gpus(rows):
        both = _both(wide, small, big, same_batch)["samples_per_s"]
        rho = spearman(both[small], both[big]) if len(both) >= 10 else float("nan")
        matrix.loc[small, big] = matrix.loc[big, small] = rho
    return matrix


def spearman(x: pd.Series, y: pd.Series) -> float:
    """Spearman's rank correlation of the pairs both have: Pearson's of their average ranks (pandas' ``method=
    "spearman"`` imports scipy, a second of every report)."""
    both = pd.DataFrame({"x": x, "y": y}).dropna()
    return float(both["x"].rank().corr(both["y"].rank()))


def one_model(frame: pd.DataFrame, model: str) -> pd.DataFrame:
    """Every row of one model (``timm:resnet50`` or ``resnet50``) on every GPU, measured and published, and the rows
    of the models that count alike (``counted_alike``: another source's name for the same network, as NVIDIA's and
    MLPerf's ResNet-50 v1.5 is torchvision's); grouped by condition (rows of two conditions are not the same work),
    then by GPU, resolution, source and table."""
    name = (model if ":" in model else f"timm:{model}").removesuffix(REPARAM)
    rows = frame[frame["model"].isin([name, *counted_alike(frame, name)])]
    order = ["condition", "gpu", "resolution", "source", "table", "reparam"]
    return rows.sort_values(order).reset_index(drop=True)


def counted_alike(frame: pd.DataFrame, name: str) -> list[str]:
    """The other models of ``frame`` counted alike with ``name`` (another source's name for the same network): their
    published rows' counts equal ``name``'s to the unit, FLOPs and other FLOPs at every resolution both have rows
    at, bytes at every resolution and precision both counted bytes in, and at least one such resolution."""
    counted = frame.dropna(subset=["flops_per_sample", "other_flops_per_sample"])
    flops = _counts(counted, ["resolution"], ["flops_per_sample", "other_flops_per_sample"])
    moved = _counts(counted.dropna(subset=["bytes_per_sample"]), ["resolution", "precision"], ["bytes_per_sample"])
    if name not in flops:
        return []
    return [
        other
        for other in flops
        if other != name and _agree(flops[name], flops[other]) and _agree(moved.get(name, {}), moved.get(other, {}))
    ]


def _counts(frame: pd.DataFrame, keys: list[str], values: list[str]) -> dict[str, dict]:
    """model -> {key tuple: the set of value tuples its rows hold there}."""
    out: dict[str, dict] = {}
    for row in frame[["model", *keys, *values]].itertuples(index=False):
        key, value = tuple(row[1 : 1 + len(keys)]), tuple(row[1 + len(keys) :])
        out.setdefault(row[0], {}).setdefault(key, set()).add(value)
    return out


def _agree(mine: dict, theirs: dict) -> bool:
    """Whether two models' counts are one at every key both have (``_counts``); False where they share none."""
    shared = mine.keys() & theirs.keys()
    return all(mine[key] == theirs[key] for key in shared) and (bool(shared) or not mine or not theirs)


def condition_differences(rows: pd.DataFrame) -> str:
    """What the conditions of ``rows`` differ in, one clause per part that differs ("precision: amp, fp32; backend:
    compile, eager"), "" when they are one condition: rows of two conditions are not the same work."""
    clauses = [
        f"{part}: {', '.join(sorted(rows[part].astype(str).unique()))}"
        for part in CONDITION_PARTS
        if rows[part].nunique() > 1
    ]
    return "; ".join(clauses)


def dynamo_gain(frame: pd.DataFrame) -> pd.DataFrame:
    """Per GPU and table pair: compile samples/s over eager samples/s of the same model, resolution and batch, in
    tables alike in all else (GPU, torch, precision, layout, source): gpu, torch, model, resolution, gain."""
    keys = ["gpu", "torch", "precision", "memory_format", "source", "model", "resolution", "batch", "reparam"]
    eager = frame[frame["backend"] == "eager"].drop_duplicates(keys)
    compiled = frame[frame["backend"] == "compile"].drop_duplicates(keys)
    pairs = compiled.merge(eager, on=keys, suffixes=("_compile", "_eager"))
    return pairs.assign(gain=pairs["samples_per_s_compile"] / pairs["samples_per_s_eager"])[
        ["gpu", "torch", "source", "model", "resolution", "gain"]
    ]


def class_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per GPU and conv class of compared rows (``main_rows``): rows, median and quartiles of utilization."""
    groups = rows.groupby(["gpu", "conv_class"])["utilization"]
    summary = groups.agg(rows="size", median="median", q25=lambda u: u.quantile(0.25), q75=lambda u: u.quantile(0.75))
    order = {gpu: i for i, gpu in enumerate(gpu_order(rows))}
    return (
        summary.reset_index()
        .sort_values(["gpu", "conv_class"], key=lambda c: c.map(order) if c.name == "gpu" else c)
        .reset_index(drop=True)
    )


def pair_ratios(rows: pd.DataFrame, same_batch: bool = False) -> pd.DataFrame:
    """For each pair of GPUs (the smaller peak first) and conv class: over the (model, resolution) rows both have,
    the median of utilization on the bigger GPU over utilization on the smaller one, and of samples/s likewise;
    ``other_batch``: how many of those rows ran at a different batch on the two GPUs (the PRO 6000's 2048 against
    1024, a row that ran out of memory), compared all the same and counted so that the difference is said
    (``same_batch``: only the rows run at one batch on both are compared)."""
    return _shared_ratios(rows, "conv_class", same_batch=same_batch)


def _wide(rows: pd.DataFrame, index: list[str], values: list[str]) -> pd.DataFrame:
    """The rows with one column per (value, GPU), ``batch`` among the values."""
    return rows.pivot_table(index=index, columns="gpu", values=[*values, "batch"], aggfunc="first")


def _both(wide: pd.DataFrame, small: str, big: str, same_batch: bool) -> pd.DataFrame:
    """The rows of a ``_wide`` frame that two GPUs both have (``same_batch``: at one batch on both)."""
    both = wide.dropna(subset=[("samples_per_s", small), ("samples_per_s", big)])
    return both[both["batch", small] == both["batch", big]] if same_batch else both


def _shared_ratios(rows: pd.DataFrame, by: str, minimum_rows: int = 1, same_batch: bool = False) -> pd.DataFrame:
    """For each pair of GPUs (``_pairs_of_gpus``) and value of the column ``by`` with at least ``minimum_rows``
    (model, resolution) rows both GPUs have (``same_batch``: at one batch on both): rows, those of another batch on
    the two, the median utilization ratio (bigger / smaller) and speedup."""
    wide = _wide(rows, ["model", "resolution", by], ["utilization", "samples_per_s"])
    records = []
    for small, big in _pairs_of_gpus(rows):
        both = _both(wide, small, big, same_batch)
        for value, part in both.groupby(level=by):
            if len(part) < minimum_rows:
                continue
            utilization = part["utilization", big] / part["utilization", small]
            speedup = part["samples_per_s", big] / part["samples_per_s", small]
            records.append(
                {
                    "smaller": small,
                    "bigger": big,
                    by: value,
                    "rows": len(part),
                    "other_batch": _other_batch(part, small, big),
                    "utilization_ratio": utilization.median(),
                    "speedup": speedup.median(),
                }
            )
    return pd.DataFrame(records)


def _other_batch(wide: pd.DataFrame, small: str, big: str) -> int:
    """How many rows of a wide frame (``batch`` per GPU in its columns) ran at different batches on two GPUs."""
    return int((wide["batch", small] != wide["batch", big]).sum())


FLOPS_ALIKE = 0.05  # two rows are "equal-FLOP" when their counted FLOPs per sample differ by at most this share
SWAP_MARGIN = 0.05  # a swap needs each GPU to order the two by more than this share of samples/s


def _pairs_of_gpus(rows: pd.DataFrame):
    gpus = gpu_order(rows)
    return [(small, big) for i, small in enumerate(gpus) for big in gpus[i + 1 :]]


def rank_swaps(rows: pd.DataFrame, same_batch: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Equal-FLOP rows that two GPUs order differently: for each pair of GPUs, over the (model, resolution) rows
    both have, the pairs of rows whose counted FLOPs per sample differ by at most ``FLOPS_ALIKE``, and those of
    them that one GPU runs faster by more than ``SWAP_MARGIN`` and the other slower by more than it. Returns the
    counts per GPU pair, and every swap with its speed ratio on each GPU and its ``swing`` (their quotient, at
    least 1), largest first; ``other_batch`` counts the rows of a pair that ran at different batches
    (``same_batch``: only rows run at one batch on both are paired)."""
    wide = _wide(rows, ["model", "resolution"], ["samples_per_s"])
    flops = rows.groupby(["model", "resolution"])["flops_per_sample"].first()
    counts, swaps = [], []
    for small, big in _pairs_of_gpus(rows):
        shared = _both(wide, small, big, same_batch)
        both = shared["samples_per_s"][[small, big]].join(flops).sort_values("flops_per_sample")
        alike, found = _equal_flop_pairs(both, small, big)
        swaps += [{"smaller": small, "bigger": big, **swap} for swap in found]
        counts.append(
            {
                "smaller": small,
                "bigger": big,
                "rows": len(both),
                "other_batch": _other_batch(shared, small, big),
                "equal_flop_pairs": alike,
                "swaps": len(found),
                "share": len(found) / alike if alike else float("nan"),
            }
        )
    swaps = pd.DataFrame(swaps)
    if not swaps.empty:
        swaps = swaps.sort_values("swing", ascending=False, ignore_index=True)
    return pd.DataFrame(counts), swaps


def _equal_flop_pairs(both: pd.DataFrame, small: str, big: str) -> tuple[int, list[dict]]:
    """How many pairs of ``both``'s rows (sorted by FLOPs) are equal-FLOP, and the swaps among them."""
    keys = [f"{model}@{resolution}" for model, resolution in both.index]
    flops, on_small, on_big = (both[column].to_numpy(float) for column in ("flops_per_sample", small, big))
    alike, swaps = 0, []
    for i in range(len(keys)):
        j = i + 1
        while j < len(keys) and flops[j] <= flops[i] * (1 + FLOPS_ALIKE):
            alike += 1
            ratio_small, ratio_big = on_small[i] / on_small[j], on_big[i] / on_big[j]
            swing = max(ratio_small / ratio_big, ratio_big / ratio_small)
            opposite = (ratio_small - 1) * (ratio_big - 1) < 0
            if opposite and min(abs(ratio_small - 1), abs(ratio_big - 1)) > SWAP_MARGIN:
                swaps.append(
                    {
                        "first": keys[i],
                        "second": keys[j],
                        "gflops": flops[i] / 1e9,
                        "first_over_second_smaller": ratio_small,
                        "first_over_second_bigger": ratio_big,
                        "swing": swing,
                    }
                )
            j += 1
    return alike, swaps


def family_ratios(rows: pd.DataFrame, minimum_rows: int = 3, same_batch: bool = False) -> pd.DataFrame:
    """For each pair of GPUs and model family (``models.sets.display_family``) with at least ``minimum_rows`` shared
    rows: the median of utilization on the bigger GPU over that on the smaller one (high: the family keeps its
    utilization on the bigger GPU), and the median speedup; per pair, the families keeping the most first
    (``same_batch``: ``pair_ratios``'s)."""
    from utilscope.models.sets import display_family

    families = {model: display_family(model.split("+")[0]) for model in rows["model"].unique()}
    frame = _shared_ratios(rows.assign(family=rows["model"].map(families)), "family", minimum_rows, same_batch)
    if frame.empty:
        return frame
    return frame.sort_values(["smaller", "bigger", "utilization_ratio"], ascending=[True, True, False])
