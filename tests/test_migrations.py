"""Schema migrations: a v1 or v2 store becomes current in place, with a backup; every committed store is current and
exports the rows and values its schema-1 export had; a migrated store resumes with nothing left to measure; a v2
CPU's thread count moves from its device name to the ``threads`` column."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
import torch

from utilscope.hardware import with_threads
from utilscope.measure.environment import environment, software_label
from utilscope.measure.settings import CudnnSettings
from utilscope.models import zoo
from utilscope.report.export import export_table
from utilscope.survey.migrations import (
    V1_SCHEMA,
    V2_SCHEMA,
    MigrationError,
    split_device,
    v1_configuration,
    v1_software,
)
from utilscope.survey.plan import SurveyGrid, grid_configuration, plan_survey
from utilscope.survey.schema import ALL_TABLES, GPU_THREADS, SCHEMA_VERSION
from utilscope.survey.store import APPLICATION_ID, Store, StoreError

DATA = Path(__file__).resolve().parent.parent / "data" / "h200"
STORES = sorted(p for p in DATA.rglob("*.sqlite") if "backup" not in p.name)
SETTINGS = [
    CudnnSettings(),
    CudnnSettings(benchmark=False),
    CudnnSettings(benchmark_limit=3),
    CudnnSettings(depthwise_heuristic=True),
    CudnnSettings(True, 3, True),
]
V1_VALUES = {
    "family": "",
    "status": "ok",
    "peak_source": "",
    "bytes_model": "",
    "unstable": 0,
    "cuda_graph": 0,
    "notes": "[]",
    "environment": "{}",
    "measured_at": "2026-01-01T00:00:00+00:00",
}


def write_v1_store(path: Path, rows: list[dict], op_classes: list[dict] = ()) -> None:
    """A store as utilscope's schema 1 wrote it."""
    conn = sqlite3.connect(path)
    for statement in V1_SCHEMA:
        conn.execute(statement)
    for table, records in (("measurements", rows), ("op_classes", op_classes)):
        for record in records:
            record = {**V1_VALUES, **record} if table == "measurements" else record
            names = ", ".join(record)
            conn.execute(
                f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(record))})", list(record.values())
            )
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()


def v1_device_and_software(cudnn: CudnnSettings) -> dict:
    """What schema 1 wrote as the device and software of a row measured here with these settings."""
    env = environment(torch.device("cpu"), "fp32", "eager", True, cudnn)
    return {
        "device": with_threads(env["device_name"], env["threads"]),
        "software": v1_software(env["torch"], env["cudnn"], env["driver"], cudnn),
    }


def test_a_cpu_configuration_names_no_cudnn_or_driver_while_schema_1_wrote_none():
    cpu = CudnnSettings(depthwise_heuristic=True)
    assert software_label("2.14.1", None, None, cpu) == "torch 2.14.1 · depthwise heuristic"
    assert software_label("2.11.0", "91900", "580.159.04", CudnnSettings()) == (
        "torch 2.11.0 · cuDNN 91900 · driver 580.159.04"
    )
    assert v1_software("2.14.1", "", "", cpu) == "torch 2.14.1 · cuDNN None · driver None · depthwise heuristic"


def test_a_cpu_configuration_of_a_cuda_build_of_torch_shows_no_cudnn():
    from utilscope.survey.schema import Configuration

    on_cpu = Configuration("Intel Xeon", "contiguous", "2.14.1", "92400", "", True, None, False, 2)
    assert on_cpu.software == "torch 2.14.1"  # the cuDNN a CUDA wheel carries, never called by a CPU cell
    on_gpu = Configuration(
        "NVIDIA H100 80GB HBM3", "channels_last", "2.11.0", "91900", "580.159.04", True, None, False, GPU_THREADS
    )
    assert on_gpu.software == "torch 2.11.0 · cuDNN 91900 · driver 580.159.04"


def test_v1_software_strings_parse_into_the_configuration_they_name():
    for text, settings in [
        ("torch 2.11.0+cu130 · cuDNN 91900 · driver 580.159.04", CudnnSettings()),
        ("torch 2.11.0+cu130 · cuDNN 91900 · driver 580.159.04 · cudnn.benchmark off", CudnnSettings(False)),
        ("torch 2.11.0+cu130 · cuDNN 91900 · driver 580.159.04 · cudnn.benchmark_limit 3", CudnnSettings(True, 3)),
        ("torch 2.3.0 · cuDNN None · driver None · depthwise heuristic", CudnnSettings(depthwise_heuristic=True)),
    ]:
        config = v1_configuration(text, "NVIDIA H200", "channels_last", GPU_THREADS)
        assert config.cudnn_settings == settings
        assert v1_software(config.torch, config.cudnn, config.driver, config.cudnn_settings) == text
        assert config.software == text.replace(" · cuDNN None · driver None", "")  # as tables show it now
    config = v1_configuration("torch 2.3.0 · cuDNN None · driver None", "cpu", "contiguous", 4)
    assert (config.torch, config.cudnn, config.driver, config.memory_format) == ("2.3.0", "", "", "contiguous")
    assert config.threads == 4
    for bad in ("torch 2.3.0", "torch 2.3 · cuDNN 1 · driver 2 · turbo mode", "torch 2.3 · cuDNN 1 · driver 2 · "):
        with pytest.raises(MigrationError, match="unrecognized software"):
            v1_configuration(bad, "cpu", "channels_last", 1)


def test_a_migrated_v1_store_has_nothing_left_to_measure_for_every_cudnn_setting(tmp_path, tiny):
    """v1 rows of every cuDNN configuration, migrated: the same grid plans 0 cells in each, a new setting all."""
    path = tmp_path / "results.sqlite"
    model = zoo.parse_spec(tiny).id  # a factory file's id names its content: the rows are of this file as it is
    cells = [
        {
            "model": model,
            "resolution": 16,
            "batch": batch,
            "precision": "fp32",
            "backend": "eager",
            **v1_device_and_software(settings),
        }
        for settings in SETTINGS
        for batch in (1, 2)
    ]
    ops = [{**cells[-1], "op_class": "dense_conv", "flop_share": 1.0, "time_share": 0.5, "time_ms": 0.1}]
    write_v1_store(path, cells, ops)
    with Store(path) as store:
        migration = store.migration
        assert (migration.from_version, migration.to_version, migration.measurements) == (1, SCHEMA_VERSION, len(cells))
        for settings in SETTINGS:
            grid = SurveyGrid((model,), (1, 2), ("fp32",), ("eager",), "cpu", cudnn=settings)
            plan = plan_survey(grid, store)
            assert (plan.cells, plan.skipped) == (0, 2), settings
        new = SurveyGrid((model,), (1, 2), ("fp32",), ("eager",), "cpu", cudnn=CudnnSettings(benchmark_limit=5))
        assert plan_survey(new, store).cells == 2
        op_classes = store.op_class_frame()
    # the v1 op-class row of the last setting was measured with full autotuning (v1 bug): keyed so now
    assert migration.op_classes_rekeyed == 1 and op_classes.loc[0, "cudnn_benchmark"]
    assert pd.isna(op_classes.loc[0, "cudnn_benchmark_limit"]) and not op_classes.loc[0, "cudnn_depthwise_heuristic"]
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    backup = sqlite3.connect(migration.backup)
    assert backup.execute("PRAGMA user_version").fetchone()[0] == 1
    assert backup.execute("SELECT COUNT(*) FROM measurements").fetchone()[0] == len(cells)
    with Store(path) as store:
        assert store.migration is None  # migrated once


def test_a_v1_store_that_cannot_be_migrated_is_left_unchanged(tmp_path):
    path = tmp_path / "results.sqlite"
    row = {"model": "m", "resolution": 8, "batch": 1, "precision": "fp32", "backend": "eager", "device": "cpu"}
    write_v1_store(path, [{**row, "software": "torch 2.3 · cuDNN 1 · driver 2"}, {**row, "batch": 2, "software": "?"}])
    before = path.read_bytes()
    with pytest.raises(StoreError, match="cannot migrate .* unrecognized software '\\?'; it was left unchanged"):
        Store(path)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["results.sqlite"]


def v1_nas_ids(frame: pd.DataFrame) -> pd.DataFrame:
    """Schema 1 named an architecture by its file (``nas:data/h200/mbv3_archs.jsonl:ID``), schema 2 by content
    (``nas:mbv3:ID``, the space from the row's family): the only value the migration changes on purpose."""
    if "family" not in frame.columns:
        return frame
    nas = frame["model"].str.startswith("nas:")
    space = frame.loc[nas, "family"].str.removeprefix("NAS ")
    arch = frame.loc[nas, "model"].str.rsplit(":", n=1).str[-1]
    return frame.assign(model=frame["model"].where(~nas, "nas:" + space + ":" + arch))


@pytest.mark.parametrize("path", STORES, ids=[str(p.relative_to(DATA)) for p in STORES])
def test_every_committed_store_is_at_the_current_schema_and_exports_its_schema_1_values(path, tmp_path):
    """Each store's export has the rows and values of the CSV exported before the migration, on every column
    that CSV has (op-class rows too, but for the cuDNN columns of those v1 mis-keyed)."""
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    conn = sqlite3.connect(copy)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    for table, kinds in ALL_TABLES.items():  # the file's tables have the current schema's columns
        assert [row[1] for row in conn.execute(f"PRAGMA table_info({table})")] == list(kinds), table
    conn.close()
    tables = [("measurements", path.with_suffix(".csv"))]
    if path.with_name(f"{path.stem}_op_classes.csv").exists():
        tables.append(("op_classes", path.with_name(f"{path.stem}_op_classes.csv")))
    with Store(copy, create=False) as store:
        for table, reference in tables:
            written = export_table(store, tmp_path / f"{table}.csv", table)
            exported = pd.read_csv(written, dtype=str, keep_default_na=False)
            before = v1_nas_ids(pd.read_csv(reference, dtype=str, keep_default_na=False))
            columns = [c for c in before.columns if table == "measurements" or c != "software"]
            order = [c for c in ("model", "resolution", "batch", "precision", "backend", "op_class") if c in columns]
            pd.testing.assert_frame_equal(
                exported[columns].sort_values(order).reset_index(drop=True),
                before[columns].sort_values(order).reset_index(drop=True),
            )


def test_rows_of_a_committed_store_name_their_configuration_in_columns():
    with Store(DATA / "survey.sqlite", create=False) as store:
        frame = store.frame()
    assert set(frame["torch"]) == {"2.11.0+cu130"} and set(frame["driver"]) == {"580.159.04"}
    assert set(frame["cudnn"]) == {"91900"} and set(frame["memory_format"]) == {"channels_last"}
    assert frame["cudnn_benchmark"].all() and frame["cudnn_benchmark_limit"].isna().all()
    assert set(frame["software"]) == {"torch 2.11.0+cu130 · cuDNN 91900 · driver 580.159.04"}


def test_the_cli_refuses_a_store_of_a_newer_schema_in_one_line(tmp_path, capsys):
    from utilscope.cli import main

    path = tmp_path / "results.sqlite"
    write_v1_store(path, [])
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    assert main(["export", str(path), str(tmp_path / "out.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"newer utilscope (schema {SCHEMA_VERSION + 1} > {SCHEMA_VERSION})" in err
    assert path.read_bytes() == before and not (tmp_path / "out.csv").exists()


def test_v1_nas_rows_are_named_by_content_and_keep_their_records(tmp_path, monkeypatch):
    """A v1 NAS id names its JSONL file relative to where it was measured: found from the store's folder up, the
    row is renamed nas:<space>:<ID> and the record is kept in the store; without the file, nothing changes."""
    from utilscope.nas.sampler import sample_architectures, save_jsonl
    from utilscope.nas.spaces import get_space

    record = sample_architectures(get_space("mbv3"), 1, seed=2)[0]
    (tmp_path / "data").mkdir()
    save_jsonl(tmp_path / "data" / "archs.jsonl", [record])
    store = tmp_path / "data" / "nas.sqlite"
    row = {
        "model": f"nas:data/archs.jsonl:{record['id']}",
        "resolution": 0,
        "batch": 1,
        "precision": "fp16",
        "backend": "graph",
        "device": "NVIDIA H200",
        "family": "NAS mbv3",
        "software": "torch 2.11.0+cu130 · cuDNN 91900 · driver 580.159.04 · cudnn.benchmark off",
    }
    write_v1_store(store, [row])
    orphan = tmp_path / "orphan.sqlite"
    write_v1_store(orphan, [{**row, "model": f"nas:gone/archs.jsonl:{record['id']}"}])
    monkeypatch.chdir(tmp_path / "data")  # not where it was measured: the file is found above the store
    with Store(store) as migrated:
        assert migrated.migration.architectures == 1
        assert list(migrated.frame()["model"]) == [f"nas:mbv3:{record['id']}"]
        assert migrated.model_records() == {f"nas:mbv3:{record['id']}": record}
    before = orphan.read_bytes()
    with pytest.raises(StoreError, match="architectures file gone/archs.jsonl its NAS rows name is not found"):
        Store(orphan)
    assert orphan.read_bytes() == before


# --- schema 2: a CPU's thread count in its device name ------------------------------------------------------------

V2_KEY = {
    "resolution": 16,
    "batch": 8,
    "precision": "fp32",
    "backend": "eager",
    "memory_format": "channels_last",
    "torch": "2.11.0+cu130",
    "cudnn": "91900",
    "driver": "",
    "cudnn_benchmark": 1,
    "cudnn_benchmark_limit": -1,
    "cudnn_depthwise_heuristic": 0,
}
V2_DEFAULTS = {
    "measurements": {**V2_KEY, **V1_VALUES},
    "op_classes": V2_KEY,
    "claims": {**V2_KEY, "owner": "a run", "owner_device": "host:cpu", "expires_at": 1e12},
}


def write_v2_store(path: Path, tables: dict[str, list[dict]]) -> None:
    """A store as utilscope's schema 2 wrote it: table -> rows (key and values not given take ``V2_DEFAULTS``)."""
    conn = sqlite3.connect(path)
    for statement in V2_SCHEMA:
        conn.execute(statement)
    for table, records in tables.items():
        for record in ({**V2_DEFAULTS[table], **record} for record in records):
            conn.execute(
                f"INSERT INTO {table} ({', '.join(record)}) VALUES ({', '.join('?' * len(record))})",
                list(record.values()),
            )
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()


def test_device_names_split_into_the_device_and_its_thread_count():
    assert split_device(with_threads("AMD EPYC 9654 96-Core Processor", 16), cpu=True) == (
        "AMD EPYC 9654 96-Core Processor",
        16,
    )
    assert split_device("NVIDIA H200", cpu=False) == ("NVIDIA H200", GPU_THREADS)
    assert split_device("Weird (x) (2 threads)", cpu=False) == ("Weird (x)", 2)
    assert (
        with_threads("AMD EPYC", 1) == "AMD EPYC (1 thread)" and with_threads("AMD EPYC", 2) == "AMD EPYC (2 threads)"
    )
    assert (
        split_device("AMD EPYC (1 threads)", cpu=True)
        == split_device("AMD EPYC (1 thread)", cpu=True)
        == ("AMD EPYC", 1)
    )
    for name in ("AMD EPYC", "AMD EPYC (0 threads)", "AMD EPYC (2 threads) "):
        with pytest.raises(MigrationError, match="names no thread count"):
            split_device(name, cpu=True)


def test_a_v2_store_keeps_a_cpus_thread_count_in_a_column_of_its_own(tmp_path):
    """CPU rows of every table get the thread count their device name held, a GPU's rows GPU_THREADS; a v2 CPU row
    measured here with 2 threads has the configuration a survey with 2 threads plans here."""
    path = tmp_path / "results.sqlite"
    here = grid_configuration(SurveyGrid(("torchvision:resnet18",), (8,), ("fp32",), ("eager",), "cpu", threads=2))[0]
    cpu = {"model": "m", "device": with_threads(here.device, 2), "torch": here.torch, "cudnn": here.cudnn}
    gpu = {"model": "m", "device": "NVIDIA H200", "precision": "fp16", "driver": "580.159.04"}
    write_v2_store(
        path,
        {
            "measurements": [
                {**cpu, "environment": json.dumps({"device_type": "cpu"})},
                {**cpu, "batch": 1, "status": "error: boom"},  # a failure row records no environment
                {**gpu, "environment": json.dumps({"device_type": "cuda"})},
            ],
            "op_classes": [{**cpu, "op_class": "dense_conv", "flop_share": 1.0}, {**gpu, "op_class": "dense_conv"}],
            "claims": [{**cpu, "batch": 32}],
        },
    )
    with Store(path) as store:
        migration = store.migration
        frame, op_classes, claims = store.frame(), store.op_class_frame(), store.claims()
        configs = {key.config for key in store.done_keys(retry_errors=False)}
    assert (migration.from_version, migration.to_version, migration.measurements, migration.op_classes) == (
        2,
        SCHEMA_VERSION,
        3,
        2,
    )
    assert sorted(zip(frame["device"], frame["threads"], frame["batch"], strict=True)) == [
        (here.device, 2, 1),
        (here.device, 2, 8),
        ("NVIDIA H200", GPU_THREADS, 8),
    ]
    assert sorted(zip(op_classes["device"], op_classes["threads"], strict=True)) == [
        (here.device, 2),
        ("NVIDIA H200", GPU_THREADS),
    ]
    assert [(key.batch, key.config) for key in claims] == [(32, here)]
    assert here in configs and len(configs) == 2
    backup = sqlite3.connect(migration.backup)
    assert backup.execute("PRAGMA user_version").fetchone()[0] == 2
    assert set(backup.execute("SELECT device FROM op_classes")) == {("NVIDIA H200",), (with_threads(here.device, 2),)}
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_v2_store_whose_cpu_names_no_thread_count_is_left_unchanged(tmp_path):
    path = tmp_path / "results.sqlite"
    write_v2_store(
        path,
        {"measurements": [{"model": "m", "device": "Some CPU", "environment": json.dumps({"device_type": "cpu"})}]},
    )
    before = path.read_bytes()
    with pytest.raises(StoreError) as error:
        Store(path)
    assert str(error.value) == (
        f"cannot migrate {path} from schema 2: the CPU device name 'Some CPU' names no thread "
        'count ("NAME (N threads)"); it was left unchanged'
    )
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["results.sqlite"]


def test_a_v3_store_gains_the_published_table_in_place_without_a_backup(tmp_path):
    """Schema 4 only adds the table of published rows: a v3 store is converted in place, its rows unchanged, and no
    backup is copied; read-only, it is converted in memory and the file stays as it was."""
    from test_store import make_row

    path = tmp_path / "results.sqlite"
    with Store(path) as store:
        store.add(make_row())
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE published")
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with Store(path, create=False) as reader:
        assert reader.migration.describe().endswith("in memory only") and len(reader.frame()) == 1
    assert path.read_bytes() == before
    with Store(path) as store:
        migration = store.migration
        assert len(store.frame()) == 1
    assert (migration.from_version, migration.to_version, migration.backup) == (3, SCHEMA_VERSION, None)
    assert migration.describe() == (
        f"migrated from schema 3 to {SCHEMA_VERSION} (1 rows, 0 op-class rows); published "
        "rows' table or columns added, no row changed"
    )
    assert sorted(p.name for p in tmp_path.iterdir() if "backup" in p.name) == []


def test_a_v4_store_gains_the_conv_class_column_and_its_rows_are_counted_again(tmp_path):
    """Schema 5 adds the published rows' conv_class: a v4 store's counted rows are uncounted again (ingest fills
    it), nothing else changes, no backup."""
    from utilscope.survey.formats import read_table

    path = tmp_path / "results.sqlite"
    table = read_table(
        "timm-benchmark",
        Path(__file__).resolve().parent.parent
        / "data"
        / "public"
        / "timm-benchmark"
        / "benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv",
    )
    with Store(path) as store:
        store.add_published(table.records()[:2])
        store.set_published_counts(
            [
                (
                    table.rows[0]["model"],
                    table.rows[0]["resolution"],
                    "amp",
                    {
                        "flops_per_sample": 10,
                        "other_flops_per_sample": 1,
                        "bytes_per_sample": 100,
                        "count_status": "ok",
                        "reparam": "n/a",
                        "conv_class": "dense",
                    },
                )
            ],
        )
        assert store.published_uncounted() == [(table.rows[1]["model"], table.rows[1]["resolution"], "amp")]
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE published DROP COLUMN conv_class")
    conn.execute("PRAGMA user_version = 4")
    conn.commit()
    conn.close()
    with Store(path) as store:
        assert (store.migration.from_version, store.migration.backup) == (4, None)
        assert len(store.published_uncounted()) == 2 and set(store.published_frame()["conv_class"]) == {""}


def test_a_gpus_fp32_rows_of_schema_5_become_fp32_strict_and_a_cpus_stay_fp32(tmp_path):
    """Before schema 6, fp32 forbade TF32; now fp32 is PyTorch's default (TF32 convolutions) and fp32_strict the
    old math: a GPU's fp32 rows become fp32_strict, after a backup; a CPU's fp32 rows (no TF32 there) stay."""
    from test_store import make_row

    path = tmp_path / "results.sqlite"
    gpu = make_row(precision="fp32")
    cpu = make_row(precision="fp32", device="AMD EPYC 9654", threads=16, model="torchvision:resnet18")
    other = make_row(precision="fp16", model="torchvision:resnet34")
    with Store(path) as store:
        for row in (gpu, cpu, other):
            store.add(row)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 5")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with Store(path, create=False) as reader:  # read-only: converted in memory, the file as it was
        assert sorted(reader.frame()["precision"]) == ["fp16", "fp32", "fp32_strict"]
    assert path.read_bytes() == before
    with Store(path) as store:
        migration = store.migration
        frame = store.frame().set_index("model")
    assert frame["precision"].to_dict() == {
        gpu["model"]: "fp32_strict",
        "torchvision:resnet18": "fp32",
        "torchvision:resnet34": "fp16",
    }
    assert (migration.from_version, migration.to_version, migration.strict_fp32) == (5, SCHEMA_VERSION, 1)
    kept = sqlite3.connect(migration.backup)
    assert sorted(p for (p,) in kept.execute("SELECT precision FROM measurements")) == ["fp16", "fp32", "fp32"]
    assert kept.execute("PRAGMA user_version").fetchone()[0] == 5
    kept.close()
    assert migration.describe().endswith("; 1 GPU rows measured in fp32 without TF32 are fp32_strict now")
