"""Which models' BatchNorm the `inference` backend folds: torch's FX `fuse` (the backend's pass until session 30)
against utilscope.measure.folding (since), per model of a set, on the CPU with random weights.

Per model: BatchNorm layers in all, left unfolded by each pass (every one when tracing fails), and the folded model's
largest difference of a fold, relative (folding.fold_difference: each fold on its own, fp64, a 1x3x96x96 input;
the backend refuses the folds above folding.FOLDING_RTOL). The `inference` rows measured with
the old pass where it left BatchNorm unfolded are the ones to measure again.
Usage: PYTHONPATH=.vendor:src python3 scripts/bn_folding_audit.py benchmarks/results/bn_folding/SET.csv SET...
(appends a row per model, resumes where it stopped; above 300M parameters the output check is skipped)
       python3 scripts/bn_folding_audit.py --archive AUDIT.csv STORE ARCHIVE
The second form moves the `inference` rows of the models whose BatchNorm the old pass left unfolded (fewer left by
utilscope's, or tracing failed) from STORE into ARCHIVE (same schema, created if missing), so that the survey
measures them again; nothing is deleted that is not copied first. ARCHIVE is a utilscope results store.
"""

import copy
import sqlite3
import sys
from pathlib import Path

import pandas as pd
import torch
from torch.fx.experimental.optimization import fuse

from utilscope.measure import folding
from utilscope.models.sets import set_members
from utilscope.models.zoo import build_model, parse_spec
from utilscope.survey.store import Store

COLUMNS = ["model", "batchnorm", "left_by_fx_fuse", "left_by_utilscope", "relative_difference", "error"]
CHECK_PARAMS_MAX = 300_000_000


def left_by_fx_fuse(model: torch.nn.Module) -> int:
    """BatchNorm layers that torch.fx.experimental.optimization.fuse leaves (all of them when it cannot trace)."""
    try:
        return folding.count_batchnorm(fuse(copy.deepcopy(model), inplace=True))
    except Exception:
        return folding.count_batchnorm(model)


def audit(model_id: str) -> dict:
    row = {"model": model_id}
    try:
        model = build_model(parse_spec(model_id))
    except Exception as exc:
        return row | {"error": f"{type(exc).__name__}: {exc}"[:200]}
    row |= {"batchnorm": folding.count_batchnorm(model), "left_by_fx_fuse": left_by_fx_fuse(model)}
    try:
        folded, folds = folding.fold(model)
    except Exception as exc:
        return row | {"left_by_utilscope": row["batchnorm"], "error": f"tracing: {type(exc).__name__}"}
    row["left_by_utilscope"] = folding.count_batchnorm(folded)
    params = sum(p.numel() for p in model.parameters())
    if params > CHECK_PARAMS_MAX:  # three copies in fp64 would not fit this machine's memory
        return row | {"error": f"output check skipped: {params / 1e6:.0f}M params"}
    return row | {"relative_difference": folding.fold_difference(model, folded, folds, torch.randn(1, 3, 96, 96))}


def main(out_csv: str, names: list[str]) -> None:
    """Audits every member of the sets into ``out_csv``, a row at a time, skipping the models already in it."""
    done = set(pd.read_csv(out_csv)["model"]) if Path(out_csv).exists() else set()
    for name in names:
        for model_id in set_members(name):
            if model_id in done:
                continue
            torch.manual_seed(0)
            row = pd.DataFrame([audit(model_id)], columns=COLUMNS)
            row.to_csv(out_csv, mode="a", header=not Path(out_csv).exists(), index=False)
            print(row.iloc[0].to_dict(), file=sys.stderr, flush=True)


def archive(audit_csv: str, store: str, archive_store: str) -> None:
    audit_rows = pd.read_csv(audit_csv)
    stale = audit_rows[audit_rows["left_by_fx_fuse"] > audit_rows["left_by_utilscope"]]["model"].tolist()
    Store(archive_store).close()  # a results store of its own (created if missing), readable by every command
    with sqlite3.connect(store) as con:
        con.execute("attach ? as archive", (archive_store,))
        marks = ",".join("?" * len(stale))
        where = f"backend = 'inference' and model in ({marks})"
        con.execute(f"insert or replace into archive.measurements select * from main.measurements where {where}", stale)
        moved = con.execute(f"delete from main.measurements where {where}", stale).rowcount
    print(f"{moved} inference rows of {len(stale)} models moved from {store} to {archive_store}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--archive"]:
        archive(*sys.argv[2:5])
    else:
        main(sys.argv[1], sys.argv[2:])
