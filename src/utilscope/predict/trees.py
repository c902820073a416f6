"""Boosted trees as plain arrays: a fitted scikit-learn ``HistGradientBoostingRegressor``, predicted with numpy.

The layer models (``layers``) are fitted with scikit-learn, and a fitted predictor is cached (``fit_cache``). What the
cache keeps of each model is this: the trees' nodes in flat arrays, so that `predict` reads a cached predictor
without importing scikit-learn, 1.1 s of the command's 6 s on 2 cores (docs/benchmarks.md). The prediction follows
scikit-learn's own (``_predictor.pyx``, ``_predict_one_from_raw_data``; the column order and category encoding of
``gradient_boosting.py``'s ``_preprocess_X``) and equals it bit for bit: tests/test_trees.py compares them on numeric
and categorical features, missing values and unknown categories. ``Trees.of`` reads the fitted model's private
attributes (``_predictors``, ``_bin_mapper``, ``_preprocessor``): a scikit-learn that changes them fails those tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Trees:
    baseline: float  # the prediction before the first tree
    roots: np.ndarray  # each tree's root, an index into the node arrays
    value: np.ndarray  # a leaf's value
    feature: np.ndarray  # a split's column of ``encoded``'s matrix
    threshold: np.ndarray  # a numeric split: a value <= threshold goes left
    missing_left: np.ndarray  # where a missing value (or an unknown category) goes
    children: np.ndarray  # a split's left child at 2 × its index, its right child after it
    is_leaf: np.ndarray
    is_categorical: np.ndarray
    bitset: np.ndarray  # a categorical split: its row of ``left_bits``
    left_bits: np.ndarray  # (splits, 8) uint32: the encoded categories that go left
    known_bits: np.ndarray  # (columns, 8) uint32: a column's known encoded categories (``encoded``'s order)
    columns: np.ndarray  # the input column of each fitted column (scikit-learn puts categorical ones first)
    categories: tuple  # per fitted column: a categorical one's raw categories, sorted; None for a numeric one

    @classmethod
    def of(cls, model) -> Trees:
        """The trees of a fitted single-output ``HistGradientBoostingRegressor`` with the squared error loss."""
        if model.loss != "squared_error" or model.n_trees_per_iteration_ != 1:
            raise ValueError("only a squared-error HistGradientBoostingRegressor's trees are kept as arrays")
        predictors = [iteration[0] for iteration in model._predictors]
        sizes = [len(p.nodes) for p in predictors]
        node_starts = np.cumsum([0, *sizes[:-1]])
        bitset_starts = np.cumsum([0] + [len(p.raw_left_cat_bitsets) for p in predictors[:-1]])
        nodes = np.concatenate([p.nodes for p in predictors])
        start, bitset_start = np.repeat(node_starts, sizes), np.repeat(bitset_starts, sizes)
        children = np.column_stack([nodes["left"], nodes["right"]]).astype(np.int64) + start[:, None]
        known_bits, column_of = model._bin_mapper.make_known_categories_bitsets()
        columns, categories = _fitted_columns(model)
        return cls(
            baseline=float(np.ravel(model._baseline_prediction)[0]),
            roots=node_starts.astype(np.int64),
            value=nodes["value"].astype(float),
            feature=nodes["feature_idx"].astype(np.int64),
            threshold=nodes["num_threshold"].astype(float),
            missing_left=nodes["missing_go_to_left"].astype(bool),
            children=children.ravel(),
            is_leaf=nodes["is_leaf"].astype(bool),
            is_categorical=nodes["is_categorical"].astype(bool),
            bitset=nodes["bitset_idx"].astype(np.int64) + bitset_start,
            left_bits=_bitsets([p.raw_left_cat_bitsets for p in predictors]),
            known_bits=_bitsets([known_bits])[column_of],
            columns=columns,
            categories=categories,
        )

    def encoded(self, features: np.ndarray) -> np.ndarray:
        """The matrix the trees split: the fitted columns' order, a category as its index among the known ones
        (NaN when unknown), as scikit-learn's ordinal encoder makes it."""
        data = np.asarray(features, dtype=float)[:, self.columns]
        for column, known in enumerate(self.categories):
            if known is not None:
                values = data[:, column]
                index = np.searchsorted(known, values).clip(max=len(known) - 1)
                data[:, column] = np.where(known[index] == values, index, np.nan)
        return data

    def predict(self, features: np.ndarray) -> np.ndarray:
        """The sum of the leaves each row reaches, one per tree, after the baseline: every row walks every tree,
        all of them a level at a time."""
        data = self.encoded(features)
        rows, trees = len(data), len(self.roots)
        node = np.tile(self.roots, rows)  # row by row, each row's trees in order
        at_row = np.repeat(np.arange(rows, dtype=np.int64) * data.shape[1], trees)
        flat = data.ravel()
        missing, categorical = bool(np.isnan(data).any()), bool(self.is_categorical.any())
        walking = np.flatnonzero(~self.is_leaf.take(node))  # the (row, tree) pairs not at a leaf yet
        while len(walking):
            at = node.take(walking)
            values = flat.take(at_row.take(walking) + self.feature.take(at))
            goes_right = values > self.threshold.take(at)
            if categorical or missing:
                self._split_categories_and_missing(at, values, goes_right, missing)
            at = self.children.take(2 * at + goes_right)
            node[walking] = at
            walking = walking[~self.is_leaf.take(at)]
        leaves = self.value.take(node).reshape(rows, trees)
        total = np.full(rows, self.baseline)
        for tree_leaves in leaves.T:  # tree by tree, as scikit-learn adds them
            total += tree_leaves
        return total

    def _split_categories_and_missing(
        self, at: np.ndarray, values: np.ndarray, goes_right: np.ndarray, missing: bool
    ) -> None:
        """``goes_right`` of categorical splits (left: the category is one of the split's; an unknown one goes
        where a missing value goes) and of missing values (where ``missing``: the data have some), in place."""
        nan = np.isnan(values) if missing else None
        categorical = self.is_categorical.take(at)
        if categorical.any():
            if nan is not None:
                categorical &= ~nan
            categorical = np.flatnonzero(categorical)
            split, code = at.take(categorical), values.take(categorical).astype(np.int64)
            in_left = _has(self.left_bits[self.bitset.take(split)], code)
            in_known = _has(self.known_bits[self.feature.take(split)], code)
            goes_right[categorical] = ~(in_left | (~in_known & self.missing_left.take(split)))
        if nan is not None:
            where = np.flatnonzero(nan)
            goes_right[where] = ~self.missing_left.take(at.take(where))


def _bitsets(parts: list[np.ndarray]) -> np.ndarray:
    """Bitsets stacked, with one empty row when there are none (a split that is not categorical reads row 0)."""
    stacked = np.concatenate([np.zeros((0, 8), np.uint32), *(np.asarray(p, np.uint32).reshape(-1, 8) for p in parts)])
    return stacked if len(stacked) else np.zeros((1, 8), np.uint32)


def _has(bitsets: np.ndarray, code: np.ndarray) -> np.ndarray:
    """Whether each row's bitset (8 uint32 words) has its code's bit."""
    words = bitsets[np.arange(len(code)), code >> 5]
    return ((words >> (code & 31).astype(np.uint32)) & 1).astype(bool)


def _fitted_columns(model) -> tuple[np.ndarray, tuple]:
    """The input column of each column the trees split, and a categorical one's known raw categories: scikit-learn
    fits categorical columns first, each ordinal-encoded, then the numeric ones, each in the input's order."""
    n_columns = model.n_features_in_
    if model._preprocessor is None:
        return np.arange(n_columns), (None,) * n_columns
    categorical = np.asarray(model.is_categorical_, dtype=bool)
    encoder = model._preprocessor.named_transformers_["encoder"]
    if model._preprocessor.output_indices_["encoder"] != slice(0, int(categorical.sum())):
        raise ValueError("scikit-learn no longer puts the categorical columns first")
    known = tuple(np.asarray([c for c in found if c == c], dtype=float) for found in encoder.categories_)
    return np.r_[np.flatnonzero(categorical), np.flatnonzero(~categorical)], known + (None,) * int((~categorical).sum())
