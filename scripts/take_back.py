"""What a GPU call brought back, taken into the checkout: every pack (``NAME-HHMMSS.tgz``, written by
``gpu_conditions.sh``'s ``packed_out``) and loose file under the PATHs named (the folder the call's files landed in),
unpacked into a staging folder and sorted by kind:

- a device profile (``GPU_CONDITION_graph.json``) -> ``src/utilscope/predict/profiles/``; a host profile
  (``GPU_host.json``) -> ``src/utilscope/predict/profiles/hosts/``;
- a results store (``NAME.sqlite``) -> ``data/GPU/NAME.sqlite``; a store's raw copy (``NAME.raw.sqlite``, kept by
  ``copy_stores.py`` when its last copy failed SQLite's check) is named with what to do, never taken;
- a log (``*.log``) -> ``benchmarks/results/GPU-DATE/logs/`` (a name already there gets ``_2``, ``_3`` ...);
- a layers run (``predict_layers/FOLDER/MODEL.json``) -> ``benchmarks/results/predict/layers/FOLDER/MODEL.json.gz``.

A profile or a store is taken only when ``check_kept.py`` passes on it against the checkout's copy (every row or
config kept, unchanged). Rows files (``*.rows-*.csv.gz``) are left: ``python -m utilscope.predict.profile_rows``
writes them again. Without ``--apply`` nothing is written: each file's destination and check are printed. Exit 1
when a file failed its check (it is not taken), 2 on a usage error. After it, for a profile taken: profile_rows,
``python -m utilscope.predict.fit_cache`` (its shipped fit), ``launch_gaps.py`` and the seeds (scripts/README.md).

    python3 scripts/take_back.py --gpu h100 [--date 2026-12-07] [--apply] PATH...
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import shutil
import sys
import tarfile
import tempfile
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_kept  # noqa: E402  (a script beside this one)

ROOT = Path(__file__).resolve().parents[1]
PROFILES = Path("src/utilscope/predict/profiles")


def unpacked(paths: list[Path], staging: Path) -> list[Path]:
    """Every file under ``paths``, each pack among them unpacked into ``staging`` in a folder of its own."""
    found = []
    for path in paths:
        for file in sorted(path.rglob("*") if path.is_dir() else [path]):
            if file.name.endswith(".tgz"):
                folder = staging / file.name.removesuffix(".tgz")
                with tarfile.open(file) as pack:
                    pack.extractall(folder, filter="data")
                found += sorted(f for f in folder.rglob("*") if f.is_file())
            elif file.is_file():
                found.append(file)
    return found


def destination(file: Path, gpu: str, date: str) -> tuple[str, Path | None]:
    """The kind of a returned file and where it goes, relative to the checkout's root (None: not taken)."""
    name = file.name
    if name.endswith(".raw.sqlite") or name.endswith(".raw.sqlite-wal"):
        return "raw store", None
    if name.endswith(".sqlite"):
        return "store", Path("data") / gpu / name
    if name.endswith("_graph.json"):
        return "profile", PROFILES / name
    if name.endswith("_host.json"):
        return "host profile", PROFILES / "hosts" / name
    if name.endswith(".log"):
        return "log", Path("benchmarks/results") / f"{gpu}-{date}" / "logs" / name
    if name.endswith(".json") and file.parent.parent.name == "predict_layers":
        return "layers", Path("benchmarks/results/predict/layers") / file.parent.name / f"{name}.gz"
    return "other", None


def free_name(path: Path) -> Path:
    """``path``, or with ``_2``, ``_3`` ... before its suffix when a file of that name exists."""
    count, candidate = 1, path
    while candidate.exists():
        count += 1
        candidate = path.with_name(f"{path.stem}_{count}{path.suffix}")
    return candidate


def kept(old: Path, new: Path) -> tuple[bool, str]:
    """check_kept.py's verdict on ``new`` against ``old``, and what it printed."""
    out = StringIO()
    with redirect_stdout(out):
        code = check_kept.main([str(old), str(new)])
    return code == 0, out.getvalue().strip()


def stale_files_cleared(store: Path) -> bool:
    """The checkout's store's ``-shm`` and empty ``-wal`` files removed (a reader's leftovers, which SQLite would
    apply to the copy taken); False, with the reason printed, when its ``-wal`` holds pages."""
    wal, shm = store.with_name(store.name + "-wal"), store.with_name(store.name + "-shm")
    if wal.exists() and wal.stat().st_size > 0:
        print(f"  NOT TAKEN: {wal} holds pages not yet in {store.name}: open and close it with sqlite3 first")
        return False
    wal.unlink(missing_ok=True)
    shm.unlink(missing_ok=True)
    return True


def take(file: Path, kind: str, target: Path, apply: bool) -> bool:
    """Check (profiles and stores) and copy one file into the checkout; False when its check failed."""
    if kind in ("profile", "host profile", "store"):
        ok, said = kept(target, file) if kind != "host profile" else (True, "a host profile: taken whole")
        said = said.replace("\n", "\n  ")
        print(f"{kind}: {file.name} -> {target}: {'kept' if ok else 'NOT TAKEN'}\n  {said}")
        if not ok:
            return False
    else:
        target = free_name(target) if kind == "log" else target
        print(f"{kind}: {file.name} -> {target}")
    if apply and kind == "store" and not stale_files_cleared(target):
        return False
    if apply:
        target.parent.mkdir(parents=True, exist_ok=True)
        if kind == "layers":
            target.write_bytes(gzip.compress(file.read_bytes()))
        else:
            shutil.copyfile(file, target)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    parser.add_argument("--gpu", required=True, help="the GPU the call ran on, as data/ and the logs name it (h100)")
    parser.add_argument("--date", default=datetime.date.today().isoformat(), help="the logs' folder date")
    parser.add_argument("--apply", action="store_true", help="copy what passes its check (default: say only)")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)  # the checkout (tests)
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        print(f"take_back.py: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    failed = 0
    with tempfile.TemporaryDirectory() as staging:
        for file in unpacked(args.paths, Path(staging)):
            kind, target = destination(file, args.gpu, args.date)
            if target is None:
                hint = " (salvage: scripts/README.md, copy_stores.py)" if kind == "raw store" else ""
                print(f"{kind}: {file.name}: not taken{hint}")
                continue
            failed += not take(file, kind, args.root / target, args.apply)
    print(f"{'taken' if args.apply else 'dry run: nothing written'}; {failed} failed their check")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
