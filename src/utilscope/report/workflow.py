"""The `report` workflow (``api.report``, and the CLI through it): a store's rows read once, its atlas rows computed
once, the GPUs without a model's row predicted in the atlas's condition (``model_view``), and the page drawn
(``html.build_report``). What it does is told through ``ReportEvents``; it prints nothing."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from utilscope.files import REPORT_FOLDER, check_output_folder
from utilscope.report import atlas, families, model_view
from utilscope.report.html import build_report
from utilscope.survey.store import Store


@dataclass
class ReportEvents:
    """What ``report`` tells while it works: the store's migration (its one-line description), the predictions it
    starts (models, and the condition as precision · layout · backend and batch), each group of models predicted
    (models in it, models left) and the drawing. Each is optional."""

    on_migration: Callable[[str], None] | None = None
    on_predicting: Callable[[int, tuple[str, str, str, int]], None] | None = None
    on_group: Callable[[int, int], None] | None = None
    on_drawing: Callable[[], None] | None = None


@dataclass
class ReportResult:
    """Where the page is, the condition the GPUs without rows were predicted in (None: no prediction), and the
    models that could not be predicted ("model: why")."""

    path: Path
    predicted_condition: tuple[str, str, str, int] | None = None
    prediction_failures: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "path": str(self.path),
            "predicted_condition": list(self.predicted_condition) if self.predicted_condition else None,
            "prediction_failures": list(self.prediction_failures),
        }


def report(
    db: str | os.PathLike, out: str | os.PathLike, predicted: bool = True, events: ReportEvents | None = None
) -> ReportResult:
    """The HTML report of the store ``db`` in the folder ``out`` (``index.html``, the figures, ``measurements.csv``);
    ``predicted``: also every model on the GPUs without its row, predicted. Raises ``UsageError`` (nothing written)
    for an output that cannot be a folder, a store that is missing or not a results store, or one with no row."""
    events = events or ReportEvents()
    check_output_folder(out, REPORT_FOLDER)  # before the store is read
    with Store(db, create=False) as store:
        if store.migration is not None and events.on_migration is not None:
            events.on_migration(f"{store.path}: {store.migration.describe()}")
        frame, published = store.frame(), store.published_frame()
        rows = atlas.atlas_rows(families.with_current_families(frame), published) if len(frame) else None
        condition = model_view.predicted_condition(rows) if predicted and rows is not None else None
        predictions, failures = None, []
        if condition is not None:
            if events.on_predicting is not None:
                events.on_predicting(rows["model"].nunique(), condition)
            predictions, failures = model_view.predicted_rows(rows, events.on_group)
        if len(frame) and events.on_drawing is not None:  # an empty store is refused in one line by build_report
            events.on_drawing()
        path = build_report(
            frame, store.op_class_frame(), out, store.model_records(), published, predictions, failures, rows
        )
    return ReportResult(path, condition, failures)
