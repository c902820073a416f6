"""The report as an explorer: the model search at the top of the page, the view of one model across GPUs
(``model_view``) and the one script that drives them and the interactive figures (``interactive``, laid out by
``figures.render``).

The page stays one folder that opens from the file system and asks for nothing on the network: plotly.js is inlined
once, each interactive figure (``<script type="application/json" data-figure="ID">`` beside its element ``ID``) and
the model view's rows are JSON in ``<script type="application/json">`` elements, and the script below renders the
figures, highlights the points of the models a search matches (plotly's
``selectedpoints``: the others fade), lists those models, and shows the rows of the one picked, grouped by
condition (rows of different conditions are never in one group). The figures are drawn one at a time, the page
answering between them; ``document.body.dataset`` gets ``firstMs`` when the first is drawn, ``plotted`` (how many)
and ``plottedMs`` when every one is (milliseconds since navigation began), and ``searched`` (the text) when a search
has run: the browser tests and the speed benchmark (``benchmarks/report_browser.py``) wait for them.
"""

from __future__ import annotations

import html
import json

import pandas as pd

from utilscope import hardware
from utilscope.report import interactive, model_view
from utilscope.units import plural, significant

SEARCH_ID, MATCHES_ID, VIEW_ID = "model-search", "search-matches", "model-view"
SEARCH_PAUSE_MS = 150  # the search runs when typing pauses this long
SHOWN_MATCHES = 60  # the search lists this many matching models, then says how many more
# the model view's columns: (header, the row's field or a function of the row)
VIEW_COLUMNS = ("kind", "GPU", "resolution", "batch", "samples/s", "FLOP util", "table / how", "torch", "reparam")

CSS = """
.search { position: sticky; top: 0; z-index: 10; background: #fff; padding: 0.5em 0; border-bottom: 1px solid #ddd; }
.search input { font: inherit; padding: 0.3em 0.6em; width: 28em; }
.search span { color: #555; margin-left: 1em; }
p.nomatch { color: #a00; margin: 0.2em 0; }
p.nomatch:empty { display: none; }
#search-matches { list-style: none; padding: 0; margin: 0.4em 0 0; max-height: 7.5em; overflow: auto; }
#search-matches li { display: inline-block; margin: 0 0.4em 0.3em 0; }
#search-matches button { font: inherit; font-size: 0.85em; padding: 0.1em 0.5em; cursor: pointer; }
.plot { width: 100%; min-height: 300px; }
p.empty { color: #666; font-style: italic; }
#model-view table tr.condition th { text-align: left; background: #e8eef4; }
#model-view td.predicted { color: #6a4c93; }
.gpu-picker { display: flex; flex-wrap: wrap; align-items: center; gap: 0.3em 1.1em; margin: 0.5em 0; }
.gpu-picker label { display: inline-flex; align-items: center; gap: 0.3em; white-space: nowrap; }
"""

SCRIPT = r"""
(function () {
  var figures = {};  // element id: the figure's JSON, from the element beside it
  document.querySelectorAll('script[type="application/json"][data-figure]').forEach(function (data) {
    figures[data.dataset.figure] = JSON.parse(data.textContent);
  });
  var models = JSON.parse(document.getElementById("model-data").textContent);
  function texts(row) { return row.map(function (code) { return models.texts[code]; }); }
  var box = document.getElementById("model-search"), list = document.getElementById("search-matches");
  var count = document.getElementById("search-count"), view = document.getElementById("model-view");
  var pattern = null, known = {};
  Object.keys(models.rows).forEach(function (name) { known[name] = true; });
  Object.keys(figures).forEach(function (id) {
    figures[id].data.forEach(function (trace) {
      (trace.customdata || []).forEach(function (row) { if (row) known[row[0]] = true; });
    });
  });
  var names = Object.keys(known).sort();
  function norm(text) { return text.trim().toLowerCase().replace(/[\s-]+/g, "_"); }  // "convnext tiny": convnext_tiny
  function toPattern(text) {  // a glob (* ? [...]) matches a whole name, with or without its source; else a part
    text = norm(text);
    if (!text) return null;
    var glob = /[*?\[]/.test(text);
    var body = text.replace(/[.+^${}()|\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".");
    return new RegExp(glob ? "^(?:[a-z0-9_]+:)?" + body + "$" : body);
  }
  function matches(name) { return pattern !== null && pattern.test(norm(name)); }
  function highlight(div) {
    if (!div.data) return;
    var picked = div.data.map(function (trace) {
      if (pattern === null || !trace.customdata) return null;
      var found = [];
      trace.customdata.forEach(function (row, i) { if (row && matches(String(row[0]))) found.push(i); });
      return found;
    });
    Plotly.restyle(div, {selectedpoints: picked});
    var none = pattern !== null && picked.every(function (found) { return !found || !found.length; });
    var note = div.parentNode.querySelector("p.nomatch");  // a figure without the searched model says so
    if (none && !note) note = div.parentNode.insertBefore(cell("p", "", "nomatch"), div);
    if (note) note.textContent = none ? "No point of this figure matches \u201c" + box.value.trim() + "\u201d." : "";
  }
  function cell(tag, text, cls) {
    var element = document.createElement(tag);
    element.textContent = text;
    if (cls) element.className = cls;
    return element;
  }
  function reveal() {  // the view scrolled to just below the sticky search bar, however tall its list of matches
    var bar = box.closest(".search");
    view.style.scrollMarginTop = (bar ? bar.offsetHeight + 8 : 0) + "px";
    view.scrollIntoView();
  }
  function showModel(name) {
    var rows = (models.rows[name] || []).map(texts);
    view.textContent = "";
    view.appendChild(cell("h3", name));
    if (!rows.length) { view.appendChild(cell("p", "No row of " + name + " in this store.")); return; }
    view.appendChild(cell("p", models.note));
    var table = document.createElement("table"), head = document.createElement("tr");
    table.id = "model-rows";
    models.columns.forEach(function (c) { head.appendChild(cell("th", c)); });
    table.appendChild(document.createElement("thead")).appendChild(head);
    var condition = null, body = null;
    rows.forEach(function (row) {
      if (row[0] !== condition) {
        condition = row[0];
        body = table.appendChild(document.createElement("tbody"));
        var title = document.createElement("tr"), th = cell("th", "condition: " + condition +
          " (compare the rows of this group with each other; another group differs in precision, layout or backend)");
        th.colSpan = models.columns.length;
        title.className = "condition";
        title.appendChild(th);
        body.appendChild(title);
      }
      var tr = document.createElement("tr");
      tr.dataset.kind = row[1];
      var kind = row[1] === "predicted" ? "predicted" : "";
      row.slice(1).forEach(function (value) { tr.appendChild(cell("td", value, kind)); });
      body.appendChild(tr);
    });
    view.appendChild(table);
  }
  function listMatches() {
    list.textContent = "";
    if (pattern === null) { count.textContent = names.length + " models"; return []; }
    var found = names.filter(matches);
    count.textContent = found.length + " of " + names.length + " models match";
    found.slice(0, models.shown).forEach(function (name) {
      var button = cell("button", name);
      button.type = "button";
      button.dataset.model = name;
      button.addEventListener("click", function () { showModel(name); reveal(); });
      list.appendChild(document.createElement("li")).appendChild(button);
    });
    if (found.length > models.shown) list.appendChild(cell("li", "and " + (found.length - models.shown) + " more"));
    return found;
  }
  var initial = view.innerHTML;  // what the view says before any search: how to use it
  function showHint(matched) {  // never the previous model's rows under a search that names no one model
    if (pattern === null) { view.innerHTML = initial; return; }
    view.textContent = "";
    view.appendChild(cell("p", matched ? matched + " models match: click one above for its rows."
                                       : "No model matches \u201c" + box.value.trim() + "\u201d."));
  }
  function search() {
    pattern = toPattern(box.value);
    var found = listMatches(), typed = norm(box.value);
    var exact = found.filter(function (n) { return norm(n) === typed || norm(n).split(":").pop() === typed; });
    if (exact.length === 1 || found.length === 1) showModel(exact[0] || found[0]);
    else showHint(found.length);
    document.querySelectorAll("div.plot").forEach(highlight);
    document.querySelectorAll("input[data-filter]").forEach(function (filter) {  // the tables follow the search
      filter.value = box.value.replace(/[*?\[\]]/g, " ").trim();
      filter.dispatchEvent(new Event("input"));
    });
    document.body.dataset.searched = box.value;
  }
  var typing = null;  // a search runs once typing pauses: each one restyles every figure
  box.addEventListener("input", function () { clearTimeout(typing); typing = setTimeout(search, models.pause_ms); });
  listMatches();
  var ids = Object.keys(figures), drawn = 0;
  function drawNext() {  // one figure at a time, yielding between them: the page answers while the rest draw
    if (drawn === ids.length) {
      document.body.dataset.plottedMs = String(Math.round(performance.now()));  // since navigation started
      document.body.dataset.plotted = String(drawn);
      return;
    }
    var div = document.getElementById(ids[drawn]), figure = figures[ids[drawn]];
    var config = {responsive: true, displaylogo: false, modeBarButtonsToRemove: ["select2d", "lasso2d"]};
    Plotly.newPlot(div, figure.data, figure.layout, config).then(function () {
      highlight(div);
      div.on("plotly_click", function (event) {  // a point opens its model's rows
        var row = event.points.length ? event.points[0].customdata : null;
        if (row && row[0]) { showModel(String(row[0])); reveal(); }
      });
      drawn += 1;
      if (drawn === 1) document.body.dataset.firstMs = String(Math.round(performance.now()));
      setTimeout(drawNext, 0);
    });
  }
  drawNext();
})();
"""


def search_box() -> str:
    """The search field, its count and the list of matching models (filled by the script)."""
    return (
        f'<div class="search"><input type="search" id="{SEARCH_ID}" aria-label="find a model" placeholder="find a '
        'model: convnext_tiny, resnet*, timm:efficientnet_b?"><span id="search-count"></span>'
        f'<ul id="{MATCHES_ID}"></ul></div>'
    )


def _view_cells(rows: pd.DataFrame) -> pd.DataFrame:
    """The model view's rows as text: condition first (the script groups by it), then ``VIEW_COLUMNS``."""
    how = rows["table"].astype(str).where(rows["source"] != model_view.PREDICTED, "")
    predicted = rows["source"] == model_view.PREDICTED
    how = how.where(~predicted, "bound: " + rows["bound"].astype(str) + "; " + rows["validation"].astype(str))
    cells = pd.DataFrame(
        {
            "condition": rows["condition"].astype(str),
            "kind": rows["source"].astype(str),
            "GPU": rows["gpu"].astype(str).map(hardware.gpu_display_name),
            "resolution": rows["resolution"].astype("Int64").astype(str),
            "batch": rows["batch"].astype("Int64").astype(str),
            "samples/s": rows["samples_per_s"].map(lambda v: "–" if pd.isna(v) else significant(v)),
            "FLOP util": rows["utilization"].map(lambda v: "–" if pd.isna(v) else f"{v:.1%}"),
            "table / how": how,
            "torch": rows["torch"].fillna("").astype(str),
            "reparam": rows["reparam"].fillna("").astype(str),
        }
    )
    return cells


def model_data(rows: pd.DataFrame, note: str) -> str:
    """The model view's JSON: ``{"columns", "note", "shown", "texts", "rows": {model: [[condition, ...cells], ...]}}``,
    each cell an index into ``texts`` (a store of 60,000 rows repeats a few thousand texts: GPUs, tables, numbers)."""
    cells = _view_cells(rows).to_numpy(str)
    codes, texts = pd.factorize(cells.ravel())
    coded = codes.reshape(cells.shape)
    positions = rows["model"].astype(str).groupby(rows["model"].astype(str).to_numpy()).indices
    by_model = {model: coded[at].tolist() for model, at in sorted(positions.items())}
    data = {"columns": list(VIEW_COLUMNS), "note": note, "shown": SHOWN_MATCHES, "pause_ms": SEARCH_PAUSE_MS}
    data |= {"texts": list(texts), "rows": by_model}
    return json.dumps(data, separators=(",", ":")).replace("</", "<\\/")


def view_note(rows: pd.DataFrame, predicted: pd.DataFrame | None, failures: list[str]) -> str:
    """What the model view's rows are, said above every model's table."""
    text = (
        "measured: utilscope's own rows; published: others' tables (the table and torch they came from); "
        "FLOP utilization against each GPU's datasheet peak for the row's precision. "
    )
    if predicted is None:
        return text + "Predictions were left out (--no-predicted)."
    text += (
        "predicted: utilscope predict (the measured profile nearest each GPU, transferred by datasheet) for the GPUs "
        "of the spec table without a measured or published row of the model, with the bound that sets the time and "
        "the predictor's validation error on that GPU where it was validated (docs/predict.md)."
    )
    if failures:
        text += f" {plural(len(failures), 'model')} could not be predicted (first: {failures[0]})."
    return text


def section(rows: pd.DataFrame, predicted: pd.DataFrame | None, failures: list[str]) -> str:
    """The model view: its heading, what it shows, the element the script fills and the rows' JSON."""
    intro = (
        "Type a model in the search box at the top (a name, part of one, or a glob such as resnet*) and click it in "
        "the list: its rows on every GPU appear here, grouped by condition."
    )
    return (
        f'<h2>One model across GPUs</h2>\n<p>{html.escape(intro)}</p>\n<div id="{VIEW_ID}"></div>\n'
        f'<script type="application/json" id="model-data">{model_data(rows, view_note(rows, predicted, failures))}'
        "</script>\n"
    )


def scripts() -> str:
    """plotly.js and the page's script: what the explorer runs, inline (the figures' JSON is beside each figure)."""
    return f"<script>{interactive.plotly_script()}</script>\n<script>{SCRIPT}</script>\n"
