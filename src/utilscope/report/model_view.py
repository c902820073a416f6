"""One model across GPUs, for the report's model view: its measured rows (ours), its published rows (others', with
their table and torch) and, for the GPUs of the spec table that have neither, predicted rows (``utilscope.predict``:
the shipped profile transferred by datasheet), each row with its kind and condition.

Rules:
- the predictions are made in one condition, the store's most common one (``predicted_condition``: precision,
  memory format, backend and batch of the most atlas rows; timm's amp · contiguous · eager at 1024 for a store with
  timm's tables), each model at its most common resolution in that condition: one trace per model and resolution,
  then composed for every GPU (cheap);
- a predicted row names the bound that sets it and the predictor's error on that GPU in the condition where it
  was validated (``predict.profiles.validation_text``: read from ``predict/profiles/validation_gpus.csv``, written by
  ``benchmarks/predict_errors.py`` from the scored rows), else that it was not validated there (on the profile's own
  GPU: that it is its own profile);
- a model the predictor cannot build (a synthetic name, an unknown model) is a failure, listed, never a row.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from utilscope.errors import UtilscopeError
from utilscope.predict.profiles import NOT_VALIDATED, validation_errors, validation_text
from utilscope.report import atlas

MEASURED, PUBLISHED, PREDICTED = atlas.MEASURED, atlas.PUBLISHED, "predicted"
CHUNK = 50  # models predicted in one call (``on_group`` is told before each)
# the columns of a predicted row (the atlas's where they mean the same)
PREDICTED_COLUMNS = [
    "model",
    "gpu",
    "gpu_name",
    "source",
    "table",
    "torch",
    "precision",
    "memory_format",
    "backend",
    "condition",
    "resolution",
    "batch",
    "samples_per_s",
    "utilization",
    "bound",
    "validation",
]


def predicted_condition(frame: pd.DataFrame) -> tuple[str, str, str, int] | None:
    """(precision, memory format, backend, batch) of the most atlas rows (``atlas.atlas_rows``), ties by the first in
    order; None for an empty frame."""
    if frame.empty:
        return None
    counts = frame.groupby(["precision", "memory_format", "backend", "batch"]).size()
    precision, layout, backend, batch = counts.sort_values(ascending=False, kind="stable").index[0]
    return str(precision), str(layout), str(backend), int(batch)


def _resolutions(frame: pd.DataFrame, condition: tuple[str, str, str, int]) -> pd.Series:
    """Each model's most common resolution in the condition (else among all its rows); of several as common, its
    native one (``zoo.native_resolution``: ResNet-50 at 224 px beside the tables' 160, 176, 224 and 288), else the
    smaller."""
    precision, layout, backend, _ = condition
    alike = (frame["precision"] == precision) & (frame["memory_format"] == layout) & (frame["backend"] == backend)
    chosen = frame[alike] if alike.any() else frame
    counts = chosen.groupby(["model", "resolution"]).size().reset_index(name="rows")
    native = counts["model"].map({model: _native(model) for model in counts["model"].unique()})
    counts = counts.assign(other=(counts["resolution"] != native).astype(int))
    counts = counts.sort_values(["model", "rows", "other", "resolution"], ascending=[True, False, True, True])
    found = counts.drop_duplicates("model").set_index("model")["resolution"].astype(int)
    missing = sorted(set(frame["model"]) - set(found.index))
    return pd.concat([found, frame[frame["model"].isin(missing)].groupby("model")["resolution"].min().astype(int)])


def _native(model: str) -> int | None:
    """The model's native resolution, None for one the zoo cannot name it of."""
    from utilscope.models import zoo

    try:
        return zoo.native_resolution(zoo.parse_spec(model))
    except UtilscopeError:
        return None


def predicted_rows(
    frame: pd.DataFrame, on_group: Callable[[int, int], None] | None = None
) -> tuple[pd.DataFrame, list[str]]:
    """Predicted rows (``PREDICTED_COLUMNS``) of every model of ``frame`` (``atlas.atlas_rows``) on each GPU of the
    spec table that has no row of it, in ``predicted_condition``; and the failures ("model: why"). The models the
    cache lacks are counted one by one, then predicted together (``predict.run.predict_table``); ``on_group`` is told
    (models in the group, models left) before each group of at most ``CHUNK`` models is counted."""
    condition = predicted_condition(frame)
    if condition is None:
        return pd.DataFrame(columns=PREDICTED_COLUMNS), []
    resolutions = _resolutions(frame, condition)
    cache = prediction_cache()
    keys = {model: cache.key(model, int(r), *condition) for model, r in resolutions.items()}
    known = cache.get(list(keys.values()))
    cached = [row for model in resolutions.index if keys[model] in known for row in known[keys[model]]]
    found = [pd.DataFrame(cached)] if cached else []  # one frame of every cached row: 1,285 frames took a second
    todo = resolutions[[keys[model] not in known for model in resolutions.index]]
    predicted, failures = _predict(todo, condition, _grouped(len(todo), on_group))
    if not predicted.empty:
        cache.put({keys[m]: rows.to_dict(orient="records") for m, rows in predicted.groupby("model") if m in keys})
        found.append(predicted)
    if not found:
        return pd.DataFrame(columns=PREDICTED_COLUMNS), failures
    return _as_rows(pd.concat(found, ignore_index=True), frame), failures


def _predict(
    resolutions: pd.Series, condition: tuple[str, str, str, int], on_model: Callable[[str], None]
) -> tuple[pd.DataFrame, list[str]]:
    """Every model of ``resolutions`` (its resolution by model) on every GPU of the spec table in ``condition``
    (``predict_table``'s rows), and the failures; one model that fails alone is a failure too."""
    from utilscope.predict.run import PredictRequest, predict_table

    if resolutions.empty:
        return pd.DataFrame(), []
    precision, layout, backend, batch = condition
    models = list(resolutions.index)
    try:
        request = PredictRequest(
            models,
            "all",
            batches=(batch,),
            precision=precision,
            backend=backend,
            channels_last=layout == "channels_last",
        )
        return predict_table(request, {m: int(r) for m, r in resolutions.items()}, on_model)
    except UtilscopeError as exc:  # one model alone raises; several keep their failures
        return pd.DataFrame(), [f"{model}: {' '.join(str(exc).split())}" for model in models]


def _grouped(total: int, on_group: Callable[[int, int], None] | None) -> Callable[[str], None]:
    """A callback for each model counted that tells ``on_group`` (models in the group, models left) before each
    group of at most ``CHUNK`` of the ``total`` models."""
    counted = [0]

    def on_model(_model: str) -> None:
        if on_group is not None and counted[0] % CHUNK == 0:
            on_group(min(CHUNK, total - counted[0]), total - counted[0])
        counted[0] += 1

    return on_model


OWN_PROFILE = 'its own device profile, no transfer (validated on networks measured on it: docs/predict.md, "Accuracy")'


def prediction_cache():
    """The cache of predicted rows (kind ``reports``): one file per utilscope, torch and zoo version, counting and
    predictor code and shipped profiles and spec table; a report of a store whose models were predicted before
    predicts only the new ones."""
    from utilscope.cache import ValueCache, source_digest
    from utilscope.survey.count_cache import versions

    return ValueCache("reports", f"{versions()}|{source_digest('predict', 'hardware')}")


def _as_rows(predictions: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """The predictions in ``PREDICTED_COLUMNS``, without the GPUs where the model has a measured or published row."""
    have = set(zip(frame["model"], frame["gpu"], strict=True))
    kept = predictions[[(m, g) not in have for m, g in zip(predictions["model"], predictions["gpu_key"], strict=True)]]
    errors = validation_errors()
    source = kept["transferred_from"].fillna("").astype(str)
    own = source.eq("")  # the GPU the profile was timed on: no transfer (its own cells may validate it)
    conditions = list(zip(kept["gpu_key"], kept["precision"], kept["memory_format"], kept["backend"], strict=True))
    texts = {condition: validation_text(errors, *condition) for condition in set(conditions)}  # ~35 of ~40,000
    validation = [
        texts[condition] or (OWN_PROFILE if mine else NOT_VALIDATED)
        for mine, condition in zip(own, conditions, strict=True)
    ]
    rows = kept.assign(
        gpu=kept["gpu_key"],
        gpu_name=kept["gpu"],
        source=PREDICTED,
        table="utilscope predict (from " + source.where(~own, "its own profile") + ")",
        torch="",
        condition=atlas.condition_of(kept),
        validation=validation,
    )
    return rows[PREDICTED_COLUMNS].reset_index(drop=True)


def model_rows(frame: pd.DataFrame, predicted: pd.DataFrame | None) -> pd.DataFrame:
    """Every model's rows for the model view: measured and published (``frame``, ``atlas.atlas_rows``) and
    predicted ones, sorted by model, then its conditions (those with a measured row first, then those with a
    published one), then kind (measured, published, predicted) and GPU; ``bound`` and ``validation`` empty where not
    predicted."""
    rows = [frame.assign(bound="", validation="")]
    if predicted is not None and not predicted.empty:
        rows.append(predicted)
    every = pd.concat(rows, ignore_index=True)
    kind = every["source"].map({MEASURED: 0, PUBLISHED: 1, PREDICTED: 2})
    return (
        every.assign(kind=kind, first=kind.groupby([every["model"], every["condition"]]).transform("min"))
        .sort_values(["model", "first", "condition", "kind", "gpu", "resolution", "batch", "table"])
        .drop(columns=["kind", "first"])
        .reset_index(drop=True)
    )
