"""A GPU-free latency / throughput / utilization predictor for the networks of a search space: the latency table's
exact per-layer times, on top of the general layer model (`utilscope predict`'s ``predict.predictor.Predictor``,
the prior of the layer models for layers the table lacks: ``nas.general``).

Prediction = the sum of the network's layers' latencies from the GPU's latency table (``nas.latency``), times a
learned correction for what the sum misses (launch gaps between layers, cache effects, the table's own offsets):
``latency = layer_sum x exp(ridge(features))`` with features log(layer_sum), the number of layers, log(FLOPs) and the
space's design features, fitted by scikit-learn's ``RidgeCV`` on the training split of a measured dataset, one model
per batch size. Layers the table lacks are estimated by per-kind layer models (scikit-learn's gradient-boosted trees
on the layer's analytic FLOPs, params, activations and configuration), fitted from the table when first needed. A
fitted predictor is a JSON *profile* (the table and the correction's coefficients), so it runs on any machine. The
held-out split is fixed by a seed and stored in the profile.
"""

from __future__ import annotations

import contextlib
import gc
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from utilscope import hardware
from utilscope.errors import UsageError
from utilscope.files import write_json
from utilscope.hardware.specs import gpu_matches
from utilscope.hardware.utilization import utilization
from utilscope.limits import check_batch, check_seed
from utilscope.nas.file_formats import PREDICTOR_FORMAT, read_predictor
from utilscope.nas.latency import LatencyTable
from utilscope.nas.sampler import load_jsonl
from utilscope.nas.space import Arch, Layer, LayerCost, Networks, parse_layer_key
from utilscope.nas.spaces import get_space
from utilscope.precision import Precision

PROFILES_DIR = Path(__file__).parent / "profiles"
HOLDOUT_FRACTION = 0.2
SPLIT_SEED = 0
RIDGE_ALPHAS = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)


@contextlib.contextmanager
def _cycle_collector_paused():
    """Pause Python's cyclic garbage collector (reference counting still frees everything): composing many
    networks allocates millions of small acyclic objects, and the collections they trigger took about 40% of a
    10,000-network regnet prediction (benchmarks/predict_speed.py)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@dataclass
class LinearModel:
    """A ridge regression on standardized features, kept as plain numbers: the network correction (target
    log(measured / layer sum), one per batch size)."""

    features: list[str]
    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float

    def log_ratio(self, matrix: np.ndarray) -> np.ndarray:
        standardized = (matrix - np.asarray(self.mean)) / np.asarray(self.scale)
        return standardized @ np.asarray(self.coef) + self.intercept


@dataclass
class TablePredictor:
    table: LatencyTable
    corrections: dict[int, LinearModel]
    peak_tflops: float | None  # the device's dense peak at the table's precision (utilization's denominator)
    holdout_ids: list[str] = field(default_factory=list)
    split_seed: int = SPLIT_SEED
    evaluation: dict = field(default_factory=dict)  # held-out metrics per batch size, written by ``fit``
    prior_ms: dict = field(default_factory=dict, repr=False)  # block key -> batch -> the general model's ms
    layer_models: dict = field(default_factory=dict, repr=False)  # "kind@batch" -> model or None, fitted when needed

    @property
    def space(self) -> str:
        return self.table.space

    def check_batch(self, batch: int) -> LinearModel:
        if batch not in self.corrections:
            raise UsageError(
                f"the {self.space} predictor for {self.table.device} has no model for batch {batch}; "
                f"it has batch {', '.join(map(str, sorted(self.corrections)))}"
            )
        return self.corrections[batch]

    def predict_frame(self, archs: list[Arch], batch: int) -> pd.DataFrame:
        """One row per architecture: id, gflops, layer_sum_ms, latency_ms, samples_per_s, utilization, and
        estimated_layers (layers the table lacks, estimated by the layer models)."""
        correction = self.check_batch(batch)
        with _cycle_collector_paused():
            design = design_matrix(self.table, archs, batch, correction.features, self.estimate_layers)
        latency_ms = design["layer_sum_ms"] * np.exp(correction.log_ratio(design[correction.features].to_numpy()))
        samples_per_s = batch / (latency_ms / 1e3)
        flops = design["flops"]
        return pd.DataFrame(
            {
                "id": [arch.get("id", "") for arch in archs],
                "gflops": flops / 1e9,
                "layer_sum_ms": design["layer_sum_ms"],
                "latency_ms": latency_ms,
                "samples_per_s": samples_per_s,
                "utilization": utilization(flops * samples_per_s / 1e12, self.peak_tflops, missing=np.nan),
                "estimated_layers": design["estimated_layers"],
            }
        )

    def estimate_layers(self, layers: list[Layer], costs: list[LayerCost], batch: int) -> np.ndarray:
        """The layer models' milliseconds for layers the table lacks at ``batch`` (``costs``: their analytic costs,
        from the space's ``layer_cost``), one model call per layer kind; UsageError naming a layer whose kind has too
        few table entries for a model."""
        by_kind: dict[str, list[int]] = {}
        for index, layer in enumerate(layers):
            by_kind.setdefault(layer.kind, []).append(index)
        estimates = np.full(len(layers), math.nan)
        for kind, indices in by_kind.items():
            name = f"{kind}@{batch}"
            if name not in self.layer_models:
                self.layer_models[name] = fit_layer_model(self.table, kind, batch, self.prior_ms)
            if self.layer_models[name] is None:
                estimates[indices] = self.general_ms([layers[i] for i in indices], batch)
                continue
            numbers = [layer_numbers(costs[i], layers[i].config) for i in indices]
            estimates[indices] = np.exp(self.layer_models[name].predict(layer_features(numbers)))
        return estimates

    def general_ms(self, layers: list[Layer], batch: int) -> np.ndarray:
        """The general model's milliseconds of layers of a kind the table holds too few of to model (a stem or a
        head at an input size the table lacks): ``predict``'s device profile of the table's GPU and precision
        (``nas.general``); without a shipped one, the table's error naming the first layer."""
        from utilscope.nas.general import general_block_ms, shipped_general_profile
        from utilscope.predict.fit_cache import load_predictor

        path = shipped_general_profile(self.table)
        if path is None:
            self.table.latency_ms(layers[0].key, batch)  # raises: no entry, no model, no general profile
        return general_block_ms(load_predictor(path), get_space(self.space), layers, batch)

    def to_dict(self) -> dict:
        return {
            "format": PREDICTOR_FORMAT,
            "table": self.table.to_dict(),
            "peak_tflops": self.peak_tflops,
            "corrections": {str(b): asdict(c) for b, c in sorted(self.corrections.items())},
            "holdout_ids": self.holdout_ids,
            "split_seed": self.split_seed,
            "evaluation": self.evaluation,
            "prior_ms": {key: {str(b): ms for b, ms in per.items()} for key, per in sorted(self.prior_ms.items())},
        }

    def save(self, path: str | Path) -> Path:
        return write_json(path, self.to_dict())


def load_table_predictor(path: str | Path) -> TablePredictor:
    data = read_predictor(path)
    corrections = {int(b): LinearModel(**c) for b, c in data["corrections"].items()}
    table = LatencyTable.from_dict(data["table"], str(path))
    prior_ms = {key: {int(b): ms for b, ms in per.items()} for key, per in data.get("prior_ms", {}).items()}
    return TablePredictor(
        table,
        corrections,
        data["peak_tflops"],
        data["holdout_ids"],
        data["split_seed"],
        data.get("evaluation", {}),
        prior_ms,
    )


def shipped_profile(gpu: str, space: str) -> Path:
    """The profile shipped for this GPU and space (``nas/profiles/<gpu>_<space>.json``); UsageError listing what is
    shipped otherwise."""
    shipped = sorted(PROFILES_DIR.glob("*.json"))
    for path in shipped:
        name_gpu, _, name_space = path.stem.rpartition("_")
        if name_space == space and gpu_matches(gpu, name_gpu):
            return path
    available = ", ".join(p.stem for p in shipped) or "none"
    raise UsageError(
        f"no shipped predictor profile for GPU {gpu!r} and space {space!r} (shipped: {available}); "
        f"fit one with `utilscope nas fit`"
    )


def check_profile_gpu(predictor: TablePredictor, gpu: str | None) -> None:
    if gpu is not None and not gpu_matches(gpu, predictor.table.device):
        raise UsageError(f"the predictor profile is for {predictor.table.device}, not {gpu!r}")


def select_table_predictor(profile: str | Path | None, gpu: str | None, space: str) -> TablePredictor:
    """The predictor of a profile file, or the one shipped for ``gpu``; checked against the GPU and the space."""
    if profile is None and gpu is None:
        raise UsageError("give --gpu (a shipped profile, e.g. h200) or --profile")
    predictor = load_table_predictor(profile if profile is not None else shipped_profile(gpu, space))
    check_profile_gpu(predictor, gpu)
    if predictor.space != space:
        raise UsageError(f"the predictor profile is for the {predictor.space} space, not {space}")
    return predictor


def load_population(path: str | Path) -> tuple[str, list[Arch]]:
    """The space and the architectures of one JSONL file, all of one space."""
    archs = load_jsonl(path)
    if not archs:
        raise UsageError(f"{path} holds no architectures (write some with `utilscope nas sample`)")
    spaces = sorted({arch["space"] for arch in archs})
    if len(spaces) != 1:
        raise UsageError(f"{path} holds architectures of {len(spaces)} spaces ({', '.join(spaces)}); give one")
    return spaces[0], archs


def predict_file(path: str | Path, profile: str | Path | None, gpu: str | None, batch: int):
    """(predictor, predictions frame) for the architectures of one JSONL file, all of one space."""
    check_batch(batch)
    space, archs = load_population(path)
    predictor = select_table_predictor(profile, gpu, space)
    return predictor, predictor.predict_frame(archs, batch)


def shipped_table_predictor(gpu: str, space: str, precision: str) -> TablePredictor | None:
    """The predictor shipped for this GPU and space if its table was timed in ``precision``, else None."""
    try:
        predictor = load_table_predictor(shipped_profile(gpu, space))
    except UsageError:
        return None
    return predictor if predictor.table.precision == precision else None


# --- features ---------------------------------------------------------------------------------------------------


def design_matrix(
    table: LatencyTable, archs: list[Arch], batch: int, features: list[str] | None = None, estimate_layers=None
):
    """Per architecture (of the table's space): layer_sum_ms, estimated_layers, flops and the correction's features
    (all of them when ``features`` is None). ``estimate_layers(layers, costs, batch) -> ms`` covers the layers the
    table lacks; without it a missing layer is an error naming it. Each distinct layer is looked up once."""
    if not archs:
        raise UsageError("no architectures given")
    networks = get_space(table.space).networks(archs)
    layer_ms, estimated = layer_latencies(table, networks, batch, estimate_layers)
    layer_sum_ms, estimated_layers, layers = _per_network(networks, layer_ms, estimated, np.ones(len(layer_ms)))
    frame = pd.DataFrame(
        {
            "layer_sum_ms": layer_sum_ms,
            "estimated_layers": estimated_layers.astype(np.int64),
            "flops": networks.flops,
            "log_layer_sum": np.log(layer_sum_ms),
            "layers": layers,
            "log_flops": [math.log(flops) for flops in networks.flops.tolist()],
        }
    )
    frame = pd.concat([frame, networks.features.add_prefix("f:")], axis=1)
    if features is not None:
        missing_features = [name for name in features if name not in frame.columns]
        if missing_features:
            raise UsageError(f"architectures lack the predictor's features {', '.join(missing_features)}")
    return frame


def _per_network(networks: Networks, *per_layer: np.ndarray) -> list[np.ndarray]:
    """Per network, the sum of each per-layer value over its layers, added one by one in the network's order
    (float64: the same sum as a loop over the network's layers)."""
    each = np.repeat(np.arange(len(networks.layer)), networks.count)  # every layer of every network, by its pair
    network, layer = networks.network[each], networks.layer[each]
    return [np.bincount(network, weights=values[layer], minlength=len(networks.flops)) for values in per_layer]


def layer_latencies(table: LatencyTable, networks: Networks, batch: int, estimate_layers=None):
    """Each distinct layer's milliseconds at ``batch`` (table entries, and ``estimate_layers``'s for the layers the
    table lacks) and whether it was estimated, as two arrays; without ``estimate_layers`` a missing layer is an
    error naming it."""
    keys = [layer.key for layer in networks.layers]
    timed = [table.entries.get(key, {}).get(batch) for key in keys]
    estimated = np.array([ms is None for ms in timed], dtype=bool)
    layer_ms = np.array([math.nan if ms is None else ms for ms in timed], dtype=float)
    if estimated.any():
        missing = np.flatnonzero(estimated)
        if estimate_layers is None:
            table.latency_ms(keys[missing[0]], batch)  # raises, naming the layer
        layers, costs = [networks.layers[i] for i in missing], [networks.costs[i] for i in missing]
        layer_ms[missing] = estimate_layers(layers, costs, batch)
    return layer_ms, estimated


def holdout_split(ids: list[str], seed: int = SPLIT_SEED, fraction: float = HOLDOUT_FRACTION) -> set[str]:
    """A fixed share of the (sorted) ids, chosen by a seeded permutation: the same ids on any machine."""
    ordered = sorted(set(ids))
    order = np.random.default_rng(seed).permutation(len(ordered))
    return {ordered[i] for i in order[: round(fraction * len(ordered))]}


def _ridge(matrix: np.ndarray, target: np.ndarray, names: list[str]) -> LinearModel:
    from sklearn.linear_model import RidgeCV

    mean, scale = matrix.mean(axis=0), matrix.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    model = RidgeCV(alphas=RIDGE_ALPHAS).fit((matrix - mean) / scale, target)
    return LinearModel(names, mean.tolist(), scale.tolist(), model.coef_.tolist(), float(model.intercept_))


def fit_correction(design: pd.DataFrame, measured_ms: np.ndarray) -> LinearModel:
    """The network correction: log(measured / layer sum) on the design's varying feature columns."""
    names = [
        c for c in design.columns if c not in ("layer_sum_ms", "flops", "estimated_layers") and design[c].std() > 0
    ]
    target = np.log(measured_ms) - np.log(design["layer_sum_ms"].to_numpy())
    return _ridge(design[names].to_numpy(dtype=float), target, names)


# --- fitting and evaluation -------------------------------------------------------------------------------------


def covered(table: LatencyTable, arch: Arch, batch: int) -> bool:
    """Whether the table holds every layer of ``arch`` at ``batch``."""
    return all(batch in table.entries.get(layer.key, {}) for layer in get_space(arch["space"]).layers(arch))


def usable_rows(table: LatencyTable, archs: dict[str, Arch], measurements: pd.DataFrame) -> pd.DataFrame:
    """The measurements (columns id, batch, latency_ms, samples_per_s) of architectures the table covers."""
    if measurements.empty:
        raise UsageError("no measurements of this space's architectures to fit the predictor on")
    unknown = sorted(set(measurements["id"]) - set(archs))
    if unknown:
        raise UsageError(f"measurements of architectures missing from the architecture files: {unknown[:3]}")
    keep = [covered(table, archs[i], b) for i, b in zip(measurements["id"], measurements["batch"], strict=True)]
    return measurements[keep]


def fit(
    table: LatencyTable,
    archs: dict[str, Arch],
    measurements: pd.DataFrame,
    seed: int = SPLIT_SEED,
    prior_ms: dict | None = None,
) -> TablePredictor:
    """Fit one correction per batch size on the training split; evaluate on the held-out split. ``prior_ms``: the
    general model's block estimates (``nas.general.prior_estimates``), the layer models' prior; none without it."""
    check_seed(seed)
    rows = usable_rows(table, archs, measurements)
    holdout = holdout_split(list(measurements["id"]), seed)
    corrections = {}
    for batch, group in rows.groupby("batch"):
        train = group[~group["id"].isin(holdout)]
        if len(train) < 10:
            raise UsageError(f"only {len(train)} training architectures at batch {batch}: measure more")
        design = design_matrix(table, [archs[i] for i in train["id"]], int(batch))
        corrections[int(batch)] = fit_correction(design, train["latency_ms"].to_numpy())
    spec = hardware.detect(table.device)
    peak = spec.peak_tflops(Precision(table.precision)) if spec is not None else None
    predictor = TablePredictor(table, corrections, peak, sorted(holdout), seed, prior_ms=prior_ms or {})
    predictor.evaluation = evaluate(predictor, archs, rows, holdout, skipped=len(measurements) - len(rows))
    predictor.evaluation["layer_models"] = layer_model_report(table, seed, predictor.prior_ms)
    uncovered = measurements.drop(index=rows.index)
    predictor.evaluation["with_estimated_layers"] = evaluate_estimated(predictor, archs, uncovered)
    predictor.evaluation["unseen_layers"] = evaluate_unseen_layers(predictor, archs, rows[rows["id"].isin(holdout)])
    return predictor


def table_without_unseen(table: LatencyTable, archs: list[Arch]) -> LatencyTable:
    """The table restricted to the layers of ``archs`` and of the space's covering set: what the table would be had
    only those architectures been sampled."""
    from utilscope.nas.latency import distinct_layers

    seen = {layer.key for layer in distinct_layers(get_space(table.space), archs)}
    entries = {key: dict(per_batch) for key, per_batch in table.entries.items() if key in seen}
    return LatencyTable(table.space, table.device, table.software, table.precision, table.cudnn_benchmark, entries)


def evaluate_unseen_layers(predictor: TablePredictor, archs: dict[str, Arch], holdout_rows: pd.DataFrame) -> dict:
    """How the predictor does on new architectures whose layers were never timed: the held-out architectures
    predicted from a table without the layers that only they contain (those go to layer models fitted on the rest
    of the table), as ``evaluate_estimated`` reports it. The correction is unchanged: its training architectures'
    layers are all in the restricted table. The general model's estimates of the removed layers are removed too, so
    that they are estimated as a new network's would be."""
    held_out = set(holdout_rows["id"])
    train_archs = [arch for key, arch in archs.items() if key not in held_out]
    table = table_without_unseen(predictor.table, train_archs)
    removed = set(predictor.table.entries) - set(table.entries)
    prior_ms = {key: per for key, per in predictor.prior_ms.items() if key not in removed}
    restricted = TablePredictor(table, predictor.corrections, predictor.peak_tflops, prior_ms=prior_ms)
    return evaluate_estimated(restricted, archs, holdout_rows)


def evaluate_estimated(predictor: TablePredictor, archs: dict[str, Arch], rows: pd.DataFrame) -> dict:
    """Throughput accuracy on measured architectures the table does not cover, whose missing layers the layer
    models estimate (never used in fitting the correction); architectures with a layer no model covers are left
    out. Per batch size: architectures, mean estimated layers, Spearman, MAPE."""
    from utilscope.nas.analysis import spearman

    report = {}
    for batch, group in rows.groupby("batch"):
        predicted, measured, estimated = [], [], []
        for key, samples_per_s in zip(group["id"], group["samples_per_s"], strict=True):
            try:
                row = predictor.predict_frame([archs[key]], int(batch)).iloc[0]
            except UsageError:
                continue
            predicted.append(row["samples_per_s"])
            measured.append(samples_per_s)
            estimated.append(row["estimated_layers"])
        if predicted:
            report[str(int(batch))] = {
                "architectures": len(predicted),
                "mean_estimated_layers": float(np.mean(estimated)),
                "spearman": spearman(pd.Series(predicted), pd.Series(measured)),
                "mape": mape(np.array(predicted), np.array(measured)),
            }
    return report


def screening_margins(predictor: TablePredictor, batch: int, errors: float = 2.0) -> dict[str, float]:
    """Per search strategy, the margin its throughput screen keeps: ``errors`` x its estimator's held-out MAPE
    (the predictor's, or the FLOPs proxy's) at this batch size; the default margin where none was evaluated."""
    from utilscope.nas.search import DEFAULT_MARGIN

    metrics = predictor.evaluation.get("per_batch", {}).get(str(batch))
    if metrics is None:
        return {"predictor": DEFAULT_MARGIN, "flops": DEFAULT_MARGIN}
    return {
        "predictor": min(0.5, errors * metrics["predictor"]["mape"]),
        "flops": min(0.5, errors * metrics["flops_proxy"]["mape"]),
    }


def mape(predicted: np.ndarray, measured: np.ndarray) -> float:
    return float(np.mean(np.abs(predicted - measured) / measured))


ESTIMATORS = ("predictor", "layer_sum", "flops_proxy")


def holdout_estimates(predictor: TablePredictor, archs: dict[str, Arch], rows: pd.DataFrame, holdout: set[str]):
    """Per held-out measurement: id, batch, measured samples/s and three estimates of it: the predictor's, the layer
    sum's alone, and the FLOPs-only proxy's (c / FLOPs with c the training median of samples/s x FLOPs)."""
    frames = []
    for batch, group in rows.groupby("batch"):
        test = group[group["id"].isin(holdout)]
        train = group[~group["id"].isin(holdout)]
        if test.empty:
            continue
        flops = np.array([get_space(archs[i]["space"]).complexity(archs[i]).flops for i in test["id"]], dtype=float)
        train_flops = np.array([get_space(archs[i]["space"]).complexity(archs[i]).flops for i in train["id"]])
        scale = float(np.median(train["samples_per_s"].to_numpy() * train_flops))
        predicted = predictor.predict_frame([archs[i] for i in test["id"]], int(batch))
        frames.append(
            pd.DataFrame(
                {
                    "id": test["id"].to_numpy(),
                    "batch": int(batch),
                    "measured": test["samples_per_s"].to_numpy(),
                    "predictor": predicted["samples_per_s"].to_numpy(),
                    "layer_sum": int(batch) / (predicted["layer_sum_ms"].to_numpy() / 1e3),
                    "flops_proxy": scale / flops,
                }
            )
        )
    columns = ["id", "batch", "measured", *ESTIMATORS]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def evaluate(
    predictor: TablePredictor, archs: dict[str, Arch], rows: pd.DataFrame, holdout: set[str], skipped: int = 0
):
    """Held-out throughput accuracy per batch size (Spearman, MAPE) of each of ``holdout_estimates``'s estimators."""
    from utilscope.nas.analysis import spearman

    report = {"holdout_architectures": len(holdout), "rows_without_table_entries": skipped, "per_batch": {}}
    for batch, group in holdout_estimates(predictor, archs, rows, holdout).groupby("batch"):
        report["per_batch"][str(int(batch))] = {"architectures": len(group)} | {
            name: {
                "spearman": spearman(group[name], group["measured"]),
                "mape": mape(group[name].to_numpy(), group["measured"].to_numpy()),
            }
            for name in ESTIMATORS
        }
    return report


def measured_dataset(frame: pd.DataFrame, space: str, records: dict[str, Arch]) -> tuple[dict[str, Arch], pd.DataFrame]:
    """From a store's measurements and model records (``Store.model_records``): the architectures of ``space``
    measured there (by id) and their ok rows as (id, batch, latency_ms, samples_per_s)."""
    rows = frame[frame["model"].str.startswith("nas:") & (frame["status"] == "ok")]
    archs = {
        record["id"]: record
        for model, record in records.items()
        if model in set(rows["model"]) and record.get("space") == space
    }
    rows = rows.assign(id=rows["model"].str.rsplit(":", n=1).str[-1])
    rows = rows[rows["id"].isin(archs)]
    if rows.empty:
        raise UsageError(f"the store has no successful measurements of {space} architectures")
    return archs, rows[["id", "batch", "latency_ms", "samples_per_s"]].reset_index(drop=True)


# --- layer models: estimates for layers the table lacks ---------------------------------------------------------

MIN_LAYER_ENTRIES = 8  # fewer table entries of a kind and batch: no model (a missing layer stays an error)
LAYER_MODEL_ITERATIONS = 400
# the residual over the prior is smoother: 100 iterations kept regnet's held-out block error (6.9% / 8.1% at batch
# 1 / 256, against 7.2% / 7.9% with 400) and cost a quarter of the prediction time
RESIDUAL_ITERATIONS = 100


def layer_numbers(cost: LayerCost, config: tuple) -> list[int]:
    """The layer's analytic FLOPs, params and activation elements, and each number of its configuration (widths,
    kernel, stride, group width, input size ...; words such as an activation's name are left out)."""
    return [cost.flops, cost.params, cost.activations, *(value for value in config if isinstance(value, int))]


def layer_features(numbers: list[list[int]]) -> np.ndarray:
    """The layer models' features: log1p of ``layer_numbers``, one row per layer."""
    return np.log1p(np.array(numbers, dtype=float))


def _layer_rows(table: LatencyTable, kind: str, batch: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The keys, feature matrix and log milliseconds of the table's ``kind`` layers timed at ``batch``."""
    space = get_space(table.space)
    keys, numbers, log_ms = [], [], []
    for key, per_batch in table.entries.items():
        key_kind, config = parse_layer_key(key)
        if key_kind == kind and batch in per_batch:
            keys.append(key)
            numbers.append(layer_numbers(space.layer_cost(kind, config), config))
            log_ms.append(math.log(per_batch[batch]))
    return keys, layer_features(numbers), np.array(log_ms)


def _boosted_trees(matrix: np.ndarray, target: np.ndarray, iterations: int = LAYER_MODEL_ITERATIONS):
    from sklearn.ensemble import HistGradientBoostingRegressor

    model = HistGradientBoostingRegressor(max_iter=iterations, random_state=SPLIT_SEED)
    return model.fit(matrix, target)


def fit_layer_model(table: LatencyTable, kind: str, batch: int, prior_ms: dict | None = None):
    """Gradient-boosted trees (scikit-learn) of log ms on ``layer_features`` over the table's entries of this kind
    and batch size, or None with fewer than ``MIN_LAYER_ENTRIES`` of them; on the general model's prior where
    ``prior_ms`` holds estimates of this kind and batch (``PriorModel``). Deterministic: the profile keeps the
    table and the prior's estimates, and the model is fitted again from them when a prediction first needs it."""
    keys, matrix, target = _layer_rows(table, kind, batch)
    if len(keys) < MIN_LAYER_ENTRIES:
        return None
    return _layer_model(table.space, kind, batch, matrix, target, prior_ms or {})


@dataclass
class PriorModel:
    """A layer model on the general model's prior (log ms): trees fitted to the general model's estimates of the
    space's blocks, plus trees fitted to the table's residual over them."""

    prior: object
    residual: object

    def predict(self, matrix: np.ndarray) -> np.ndarray:
        return self.prior.predict(matrix) + self.residual.predict(matrix)


def _layer_model(space: str, kind: str, batch: int, matrix: np.ndarray, target: np.ndarray, prior_ms: dict):
    """Trees on (matrix, target), on the prior's trees when ``prior_ms`` has enough estimates of kind and batch."""
    prior = _fit_prior(space, kind, batch, prior_ms)
    if prior is None:
        return _boosted_trees(matrix, target)
    residual = _boosted_trees(matrix, target - prior.predict(matrix), RESIDUAL_ITERATIONS)
    return PriorModel(prior, residual)


def _fit_prior(space: str, kind: str, batch: int, prior_ms: dict):
    """Trees of log ms on ``layer_features`` over the general model's estimates of this kind at ``batch``, or None
    with fewer than ``MIN_LAYER_ENTRIES`` of them."""
    configs, ms = [], []
    for key, per_batch in prior_ms.items():
        key_kind, config = parse_layer_key(key)
        if key_kind == kind and batch in per_batch:
            configs.append(config)
            ms.append(per_batch[batch])
    if len(configs) < MIN_LAYER_ENTRIES:
        return None
    layer_space = get_space(space)
    matrix = layer_features([layer_numbers(layer_space.layer_cost(kind, config), config) for config in configs])
    return _boosted_trees(matrix, np.log(ms))


def layer_model_report(table: LatencyTable, seed: int = SPLIT_SEED, prior_ms: dict | None = None) -> dict:
    """Per "kind@batch" with a model: its entries and its error on a seeded 20% of them, fitted on the rest (the
    prior's estimates of the held-out entries left out too)."""
    kinds = {(parse_layer_key(key)[0], batch) for key, per_batch in table.entries.items() for batch in per_batch}
    report = {}
    for kind, batch in sorted(kinds):
        keys, matrix, target = _layer_rows(table, kind, batch)
        if len(keys) < MIN_LAYER_ENTRIES:
            continue
        held = holdout_split(keys, seed)
        test = np.array([key in held for key in keys])
        prior = {key: per for key, per in (prior_ms or {}).items() if key not in held}
        trial = _layer_model(table.space, kind, batch, matrix[~test], target[~test], prior)
        predicted = np.exp(trial.predict(matrix[test]))
        report[f"{kind}@{batch}"] = {"entries": len(keys), "holdout_mape": mape(predicted, np.exp(target[test]))}
    return report
