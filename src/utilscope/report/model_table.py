"""The report's table of every model: one row per series (a model in one configuration: resolution, precision,
backend, device, software), its size, its utilization and samples/s at the store's smallest and largest batch, and
which of its rows failed. ``model_table`` computes it (numbers, for tests); ``html`` lays it out, with the filter box
and the click-to-sort headers of ``SCRIPT``.
"""

from __future__ import annotations

import pandas as pd

from utilscope.report import plots
from utilscope.report.families import family_labels

NOT_MEASURED = "not measured"  # the cell of a series with no row at that batch size

# Inline, no library: a text box filters the rows of its table (every word must appear in a row), clicking a header
# of the last header row sorts by that column (numbers by value, "–" and status words after the numbers in either
# direction; numeric columns sort highest first on the first click, text columns A to Z, resnet2 before resnet10).
SCRIPT = """
(function () {
  function value(cell) {
    var text = cell.textContent.trim();
    return /^[-+]?[\\d.,]*\\d[%×]?$/.test(text) ? parseFloat(text.replace(/[,%×]/g, "")) : null;
  }
  function compare(a, b, direction, numeric) {
    if (numeric) {
      var x = value(a), y = value(b);
      if (x === null || y === null) return (x === null) - (y === null);
      return direction * (x - y);
    }
    return direction * a.textContent.localeCompare(b.textContent, undefined, {numeric: true});
  }
  function sortBy(table, header, column) {
    var numeric = header.classList.contains("n");
    var direction = header.dataset.sort === "desc" ? 1 : header.dataset.sort === "asc" ? -1 : numeric ? -1 : 1;
    table.querySelectorAll("th[data-sort]").forEach(function (th) { delete th.dataset.sort; });
    header.dataset.sort = direction === 1 ? "asc" : "desc";
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) { return compare(a.cells[column], b.cells[column], direction, numeric); });
    rows.forEach(function (row) { body.appendChild(row); });
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var headers = table.tHead.rows[table.tHead.rows.length - 1].cells;
    Array.prototype.forEach.call(headers, function (header, column) {
      header.title = "click to sort";
      header.addEventListener("click", function () { sortBy(table, header, column); });
    });
  });
  document.querySelectorAll("input[data-filter]").forEach(function (box) {
    var table = document.getElementById(box.dataset.filter), count = document.getElementById(box.dataset.count);
    var rows = Array.prototype.slice.call(table.tBodies[0].rows);
    var texts = rows.map(function (row) { return row.textContent.toLowerCase(); });
    box.addEventListener("input", function () {
      var words = box.value.toLowerCase().split(/\\s+/).filter(Boolean), shown = 0;
      rows.forEach(function (row, i) {
        var match = words.every(function (word) { return texts[i].indexOf(word) >= 0; });
        row.hidden = !match;
        shown += match;
      });
      count.textContent = shown + " of " + rows.length + " rows";
    });
  });
})();
"""


def table_batches(measurements: pd.DataFrame) -> list[int]:
    """The store's smallest and largest batch size (one when they are the same, none without rows)."""
    batches = sorted(int(batch) for batch in measurements["batch"].unique())
    return sorted({batches[0], batches[-1]}) if batches else []


def failed_text(rows: pd.DataFrame) -> str:
    """``"ok"`` when every row of a series measured, else its failures by kind: ``"oom at 128, 256; error at 8"``."""
    failed = rows[rows["kind"] != "ok"].sort_values("batch")
    if failed.empty:
        return "ok"
    parts = [f"{kind} at " + ", ".join(str(int(b)) for b in group["batch"]) for kind, group in failed.groupby("kind")]
    return "; ".join(parts)


def _natural(column: pd.Series) -> pd.Series:
    """A sort key that orders the numbers inside text by value: ``resnet2`` before ``resnet10``."""
    if not (pd.api.types.is_object_dtype(column) or pd.api.types.is_string_dtype(column)):
        return column
    return column.astype(str).str.replace(r"\d+", lambda found: found.group().zfill(12), regex=True)


def model_table(measurements: pd.DataFrame) -> pd.DataFrame:
    """One row per series (the ``plots.SERIES`` columns), sorted by them (numbers in names by value): ``family``,
    ``gflops_per_sample``, ``params_millions`` (NaN when the store has no params column), then for each of
    ``table_batches`` ``status_at_B`` (ok / oom / error / not measured), ``utilization_at_B`` and
    ``samples_per_s_at_B`` (NaN unless ok), and ``status`` (``failed_text`` over all the series' batches)."""
    rows = measurements.assign(kind=measurements["status"].map(plots.status_kind), family=family_labels(measurements))
    rows = rows.sort_values(plots.SERIES + ["batch"], key=_natural, kind="stable")
    first = rows.drop_duplicates(plots.SERIES).set_index(plots.SERIES)
    params = first["params"].astype(float) if "params" in first.columns else pd.Series(float("nan"), first.index)
    table = pd.DataFrame(
        {
            "family": first["family"],
            "gflops_per_sample": first["flops_per_sample"].astype(float) / 1e9,
            "params_millions": params / 1e6,
        }
    )
    for batch in table_batches(measurements):
        at = rows[rows["batch"] == batch].drop_duplicates(plots.SERIES, keep="last").set_index(plots.SERIES)
        at = at.reindex(table.index)
        ok = at["kind"] == "ok"
        table[f"status_at_{batch}"] = at["kind"].fillna(NOT_MEASURED)
        table[f"utilization_at_{batch}"] = at["utilization"].astype(float).where(ok)
        table[f"samples_per_s_at_{batch}"] = at["samples_per_s"].astype(float).where(ok)
    failed = rows[rows["kind"] != "ok"].groupby(plots.SERIES, dropna=False)[["kind", "batch"]].apply(failed_text)
    table["status"] = failed.reindex(table.index).fillna("ok") if len(failed) else "ok"
    return table.reset_index()
