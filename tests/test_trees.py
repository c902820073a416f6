"""predict.trees: scikit-learn's boosted trees kept as arrays predict exactly what scikit-learn predicts."""

import pickle
import subprocess
import sys

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor

from utilscope.predict.trees import Trees


def _data(rows: int = 600):
    """Two numeric columns around two categorical ones (codes 0-11 and 0-4), with missing values in both kinds."""
    rng = np.random.default_rng(0)
    features = np.column_stack(
        [
            rng.normal(size=rows),
            rng.integers(0, 12, rows).astype(float),
            rng.exponential(size=rows),
            rng.integers(0, 5, rows).astype(float),
        ]
    )
    target = 2 * features[:, 0] + np.sin(features[:, 1]) + (features[:, 3] > 2) + 0.1 * rng.normal(size=rows)
    features[rng.random(rows) < 0.05, 0] = np.nan
    features[rng.random(rows) < 0.05, 1] = np.nan
    return features, target


def _unseen(features: np.ndarray) -> np.ndarray:
    """Rows the fit never saw: unknown categories, missing values where there were none, values beyond the range."""
    asked = features.copy()
    asked[:20, 1] = 99.0
    asked[20:30, 3] = 7.0
    asked[30:40, 2] = np.nan
    asked[40:50, 3] = np.nan
    asked[50:60, 0] = 1e6
    return asked


@pytest.mark.parametrize(
    "categorical", [None, [False, True, False, True], [False, False, False, True]], ids=["numeric", "two", "last"]
)
def test_the_arrays_predict_what_scikit_learn_predicts_bit_for_bit(categorical):
    features, target = _data()
    model = HistGradientBoostingRegressor(
        max_iter=60, random_state=0, min_samples_leaf=5, categorical_features=categorical
    ).fit(features, target)
    trees = Trees.of(model)
    for asked in (features, _unseen(features), features[:1]):
        assert np.array_equal(trees.predict(asked), model.predict(asked))


def test_a_constant_target_predicts_its_baseline():
    features = np.arange(40, dtype=float).reshape(20, 2)
    model = HistGradientBoostingRegressor(max_iter=5).fit(features, np.full(20, 3.0))
    assert np.array_equal(Trees.of(model).predict(features), np.full(20, 3.0))


def test_only_a_squared_error_regressor_is_kept():
    features, target = _data(100)
    model = HistGradientBoostingRegressor(max_iter=5, loss="absolute_error").fit(features, target)
    with pytest.raises(ValueError, match="squared-error"):
        Trees.of(model)


def test_kept_trees_are_read_back_without_scikit_learn(tmp_path):
    features, target = _data(200)
    model = HistGradientBoostingRegressor(max_iter=10, categorical_features=[False, True, False, True])
    path = tmp_path / "trees.pkl"
    path.write_bytes(pickle.dumps(Trees.of(model.fit(features, target))))
    np.save(tmp_path / "features.npy", features)
    code = (
        "import pickle, sys, numpy as np; trees = pickle.loads(open(sys.argv[1], 'rb').read());"
        "print(repr(trees.predict(np.load(sys.argv[2]))[:3].tolist())); print('sklearn' in sys.modules)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code, str(path), str(tmp_path / "features.npy")], capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    values, imported = shown.stdout.splitlines()
    assert eval(values) == model.predict(features[:3]).tolist()
    assert imported == "False"
