"""Others' published tables as rows of their own: timm's benchmark file names give each row's condition, the rows
keep their provenance, ingesting twice adds nothing, a changed table is refused, and bad tables are one line with
nothing written. Only the RTX 3090 tables' contents are read here (the 5090 and PRO 6000 tables are a test set of
the predictor: their names are parsed, their rows never looked at)."""

from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from utilscope.cli import main
from utilscope.errors import UsageError
from utilscope.models import timm_sets
from utilscope.survey.formats.timm_benchmark import TableCondition, condition_of, torch_version
from utilscope.survey.published import ingest
from utilscope.survey.store import Store

PUBLIC = Path(__file__).resolve().parent.parent / "data" / "public" / "timm-benchmark"
NCHW_3090 = PUBLIC / "benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv"
NHWC_3090 = PUBLIC / "benchmark-infer-amp-nhwc-pt240-cu124-rtx3090.csv"
HEADER = (
    "model,infer_img_size,infer_samples_per_sec,infer_step_time,infer_batch_size,param_count,infer_gmacs,infer_macts\n"
)


def test_torch_versions_as_timm_writes_them():
    assert [torch_version(d) for d in ("291", "240", "210", "113")] == ["2.9.1", "2.4.0", "2.1.0", "1.13"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv",
            TableCondition("rtx_3090", "rtx3090", "amp", "contiguous", "eager", "2.4.0", "12.4"),
        ),
        (
            "benchmark-infer-amp-nhwc-pt240-cu124-rtx4090.csv",
            TableCondition("rtx_4090", "rtx4090", "amp", "channels_last", "eager", "2.4.0", "12.4"),
        ),
        (
            "benchmark-infer-amp-nchw-pt291-cu128-4090-dynamo.csv",
            TableCondition("rtx_4090", "4090", "amp", "contiguous", "compile", "2.9.1", "12.8"),
        ),
        (
            "benchmark-infer-amp-nchw-pt291-cu130-5090.csv",
            TableCondition("rtx_5090", "5090", "amp", "contiguous", "eager", "2.9.1", "13.0"),
        ),
        (
            "benchmark-infer-amp_bf16-nchw-pt291-cu130-pro6000maxq-dynamo.csv",
            TableCondition("rtx_pro_6000_maxq", "pro6000maxq", "amp_bf16", "contiguous", "compile", "2.9.1", "13.0"),
        ),
        (
            "benchmark-infer-bf16-nchw-pt291-cu130-pro6000maxq-dynamo.csv",
            TableCondition("rtx_pro_6000_maxq", "pro6000maxq", "bf16", "contiguous", "compile", "2.9.1", "13.0"),
        ),
    ],
)
def test_a_tables_name_gives_the_condition_of_its_rows(name, expected):
    assert condition_of(Path(name)) == expected


def test_every_shipped_tables_name_names_a_gpu_of_the_spec_table():
    gpus = {condition_of(path).gpu for path in PUBLIC.glob("benchmark-infer-*.csv")}
    assert gpus == {"rtx_3090", "rtx_4090", "rtx_5090", "rtx_pro_6000_maxq"}


def test_every_shipped_table_is_listed_in_its_provenance_with_its_content():
    import hashlib

    with open(PUBLIC / "provenance.csv") as f:
        listed = {row["file"]: row for row in csv.DictReader(f)}
    tables = sorted(PUBLIC.glob("benchmark-infer-*.csv"))
    assert len(tables) == 13 and set(listed) == {path.name for path in tables}
    for path in tables:
        assert hashlib.sha256(path.read_bytes()).hexdigest() == listed[path.name]["sha256"]


def test_ingesting_a_table_stores_every_row_with_its_provenance_once(tmp_path, capsys):
    db = tmp_path / "pub.sqlite"
    with open(NCHW_3090) as f:
        published = list(csv.DictReader(f))
    assert main(["ingest", "timm-benchmark", str(NCHW_3090), "--db", str(db), "--no-count"]) == 0
    assert f"{len(published)} rows, {len(published)} rows added" in capsys.readouterr().out
    with Store(db, create=False) as store:
        frame = store.published_frame()
        assert store.frame().empty  # never mixed with measurements
    assert len(frame) == len(published)
    first = frame.iloc[0]
    assert first["model"] == f"timm:{published[0]['model']}" and first["source_row"] == 1
    assert first["samples_per_s"] == float(published[0]["infer_samples_per_sec"])
    assert (first["repository"], first["source_path"]) == (
        "huggingface/pytorch-image-models",
        f"results/{NCHW_3090.name}",
    )
    assert len(first["source_commit"]) == 40 and first["gpu"] == "rtx_3090" and first["count_status"] == ""
    assert set(frame["batch"]) <= {int(row["infer_batch_size"]) for row in published}
    assert main(["ingest", "timm-benchmark", str(NCHW_3090), str(NHWC_3090), "--db", str(db), "--no-count"]) == 0
    out = capsys.readouterr().out
    assert "ingested before: nothing added" in out and f"{NHWC_3090.name}: " in out
    with Store(db, create=False) as store:
        again = store.published_frame()
    assert len(again) == len(published) + len(NHWC_3090.read_text().splitlines()) - 1
    assert (
        again[again["source_file"] == NCHW_3090.name]
        .drop(columns="ingested_at")
        .equals(frame.drop(columns="ingested_at"))
    )


def test_a_changed_table_of_a_name_ingested_before_is_refused_and_nothing_is_written(tmp_path):
    db, changed = tmp_path / "pub.sqlite", tmp_path / "other" / NCHW_3090.name
    ingest([NCHW_3090], db)
    changed.parent.mkdir()
    changed.write_text(NCHW_3090.read_text() + "resnet50,224,1.0,1.0,1024,25.6,4.1,11.1\n")
    before = db.read_bytes()
    with pytest.raises(UsageError, match="was ingested into .* with other content .* a changed table is never mixed"):
        ingest([changed], db)
    assert db.read_bytes() == before
    copy = tmp_path / "elsewhere" / NCHW_3090.name
    copy.parent.mkdir()
    shutil.copyfile(NCHW_3090, copy)
    assert ingest([copy], db).files[0][2] == 0  # the same content from another folder: ingested before


def _table(tmp_path: Path, body: str, name: str = "benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


@pytest.mark.parametrize(
    ("name", "body", "message"),
    [
        ("benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv", "a,b\n1,2\n", "lacks the columns"),
        ("benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv", HEADER, "without rows"),
        (
            "benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv",
            HEADER + "resnet50,224,abc,1.0,1024,25.6,4.1,11.1\n",
            "row 1: infer_samples_per_sec must be a number above 0, got 'abc'",
        ),
        ("benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv", HEADER + "resnet50,224,nan,1.0,1024,,,\n", "above 0"),
        (
            "benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv",
            HEADER + "resnet50,224.5,9.0,1.0,1024,,,\n",
            "infer_img_size must be a whole number above 0",
        ),
        ("benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv", HEADER + ",224,9.0,1.0,1024,,,\n", "row 1: no model name"),
        (
            "benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv",
            HEADER + "resnet50,224,9.0,1.0,1024,1,1,1,9\n",
            "row 1: extra cells",
        ),
        ("benchmark-infer-amp-nchw-pt240-cu124-quantum9000.csv", HEADER, "unknown GPU 'quantum9000'"),
        ("benchmark-infer-fp32-nchw-pt240-cpu-i7_12700h-dynamo.csv", HEADER, "is a CPU's table"),
        ("results-imagenet.csv", HEADER, "is not named like a timm inference benchmark table"),
    ],
)
def test_a_bad_table_is_one_line_and_creates_no_store(tmp_path, name, body, message):
    db = tmp_path / "pub.sqlite"
    with pytest.raises(UsageError, match=message):
        ingest([_table(tmp_path, body, name)], db)
    assert not db.exists()


def test_each_rows_model_is_counted_at_its_resolution_and_a_model_that_cannot_be_built_is_kept(tmp_path, capsys):
    """Counting goes with ingesting: every (model, resolution) once, our FLOPs agreeing with timm's GMACs x 2 where
    both count the same work (ResNet-10-T: 0.70 GMACs at 176 px); a model this timm cannot build keeps its row, the
    reason in ``count_status``; MobileOne's row, 1.09 GMACs as our plain count, says the run did not reparameterize
    it."""
    rows = [
        "resnet10t,176,9000.0,113.7,1024,5.44,0.70,2.4",
        "mobileone_s0,224,8000.0,128.0,1024,5.29,1.09,15.5",
        "no_such_net_in_this_timm,224,7000.0,146.3,1024,1.0,1.0,1.0",
        "resnet10t,176,8800.0,116.4,512,5.44,0.70,2.4",
    ]
    table = _table(tmp_path, HEADER + "\n".join(rows) + "\n")
    db = tmp_path / "pub.sqlite"
    assert main(["ingest", "timm-benchmark", str(table), "--db", str(db)]) == 0
    said = capsys.readouterr().out
    assert "counted 3 models at a resolution and precision of their rows (1 could not be built or counted" in said
    with Store(db, create=False) as store:
        frame = store.published_frame().set_index("source_row")
    assert frame.loc[1, "flops_per_sample"] == frame.loc[4, "flops_per_sample"]  # one count for both batches
    assert abs(frame.loc[1, "flops_per_sample"] / 2e9 - 0.70) < 0.005 and frame.loc[1, "bytes_per_sample"] > 0
    assert list(frame["reparam"]) == ["n/a", "no", "", "n/a"] and frame.loc[2, "count_status"] == "ok"
    assert list(frame["conv_class"]) == ["dense", "depthwise", "", "dense"]  # MobileOne: depthwise 3x3s
    assert frame.loc[3, "count_status"].startswith("error: UsageError: unknown model 'timm:no_such_net_in_this_timm'")
    assert main(["ingest", "timm-benchmark", str(table), "--db", str(db)]) == 0  # nothing left to count
    assert "counted 0 models" in capsys.readouterr().out
    from utilscope.survey import published

    def refused(*args):
        raise AssertionError(f"counted again: {args}")

    with pytest.MonkeyPatch.context() as patch:  # another store: the successful counts come from the count cache
        patch.setattr(
            published,
            "count_row",
            lambda *args: (
                refused(*args)
                if "no_such" not in args[0]
                else {"count_status": "error: not cached", "reparam": "", "conv_class": ""}
            ),
        )
        patch.setattr(published, "count", refused, raising=False)
        other = tmp_path / "other.sqlite"
        assert main(["ingest", "timm-benchmark", str(table), "--db", str(other), "--jobs", "1"]) == 0
    with Store(other, create=False) as store:
        again = store.published_frame().set_index("source_row")
    assert list(again["flops_per_sample"].fillna(0)) == list(frame["flops_per_sample"].fillna(0))
    assert list(again["reparam"]) == ["n/a", "no", "", "n/a"]  # MobileOne's reparameterized count cached too


def test_utilization_is_our_flops_times_the_published_throughput_over_the_datasheet_peak():
    """amp on an RTX 3090: 71 TFLOP/s (fp16 tensor with fp32 accumulate); 2 GFLOPs x 1000/s = 2 TFLOP/s = 2.817%;
    200 MB x 1000/s = 200 GB/s of 936 GB/s; a row not counted has none."""
    import pandas as pd

    from utilscope.survey.published import with_utilization

    frame = pd.DataFrame(
        {
            "gpu": ["rtx_3090", "rtx_3090", "rtx_5090"],
            "precision": ["amp", "amp", "bf16"],
            "samples_per_s": [1000.0, 50.0, 1000.0],
            "flops_per_sample": pd.array([2_000_000_000, None, 2_000_000_000], dtype="Int64"),
            "bytes_per_sample": pd.array([200_000_000, None, 200_000_000], dtype="Int64"),
        }
    )
    rows = with_utilization(frame)
    assert list(rows["peak_tflops"]) == [71.0, 71.0, 209.5]
    assert rows.loc[0, "utilization"] == pytest.approx(2 / 71) and rows.loc[2, "utilization"] == pytest.approx(
        2 / 209.5
    )
    assert rows.loc[0, "bandwidth_utilization"] == pytest.approx(200 / 936) and pd.isna(rows.loc[1, "utilization"])


def test_gmacs_that_disagree_beyond_five_percent_and_timms_rounding_are_listed_largest_first():
    import pandas as pd

    from utilscope.survey.published import gmacs_disagreements

    frame = pd.DataFrame(
        {
            "model": ["a", "b", "c", "d", "e", "f"],
            "resolution": [224] * 6,
            "gmacs": [4.11, 4.11, 0.03, 1.0, 2.0, 0.2],
            "count_status": ["ok"] * 4 + ["error: x", "ok"],
            "reparam": ["n/a"] * 5 + ["yes"],
            "flops_per_sample": pd.array(
                [8_220_000_000, 9_000_000_000, 50_000_000, 1_600_000_000, None, 800_000_000], dtype="Int64"
            ),
        }
    )
    # a: 4.11 vs 4.11; c: 0.025 vs 0.03, within the rounding of 0.005; f: a reparameterized run's GMACs
    apart = gmacs_disagreements(frame)
    assert list(apart["model"]) == ["d", "b"] and list(apart["ratio"].round(3)) == [0.8, 1.095]


def test_a_tables_rows_of_a_model_set_are_listed_as_survey_input(capsys):
    """``models --set timm-cnn --rows-of TABLE``: MODEL@RES for the table's CNN rows, once each, sorted."""
    with open(NCHW_3090) as f:
        rows = [(f"timm:{r['model']}", int(r["infer_img_size"])) for r in csv.DictReader(f)]
    assert main(["models", "--set", "timm-cnn", "--rows-of", str(NCHW_3090)]) == 0
    listed = capsys.readouterr().out.split()
    cnn = set(timm_sets.members("cnn"))
    assert listed == [f"{model}@{res}" for model, res in sorted({(m, r) for m, r in rows if m in cnn})]
    assert "timm:resnet50@224" in listed and "timm:resnet50@288" in listed  # one model at two resolutions
    assert main(["models", "--set", "timm-cnn", "--rows-of", str(NCHW_3090), "--native-only"]) == 0
    native = capsys.readouterr().out.split()
    assert "timm:resnet50@224" in native and "timm:resnet50@288" not in native and set(native) < set(listed)
    assert main(["models", "--rows-of", str(NCHW_3090)]) == 2
    assert main(["models", "--set", "timm-cnn", "--native-only"]) == 2


def test_whether_a_tables_run_reparameterized_a_model_is_read_from_its_gmacs():
    """fvcore counted the model timm's script ran: GMACs near our reparameterized count mean --reparam was given."""
    from utilscope.survey.published import reparam_verdict

    assert reparam_verdict(0.17, plain_gmacs=0.404, merged_gmacs=0.17) == "yes"  # GhostNetV3-100 at 224 px
    assert reparam_verdict(0.40, plain_gmacs=0.404, merged_gmacs=0.17) == "no"
    assert reparam_verdict(1.0, plain_gmacs=1.0, merged_gmacs=0.99) == "unknown"  # both agree: cannot tell
    assert reparam_verdict(None, plain_gmacs=1.0, merged_gmacs=0.5) == "unknown"
    assert reparam_verdict(0.7, plain_gmacs=1.0, merged_gmacs=0.5) == "unknown"  # neither


def test_ingest_decides_reparameterization_per_row_from_the_gmacs(tmp_path, capsys):
    """MobileOne-S0 at 224 px: 1.05 GMACs plain, 0.275 reparameterized (our counts); a row printing 0.28 was
    reparameterized, one printing 1.05 was not."""
    rows = ["mobileone_s0,224,8000.0,128.0,1024,5.29,0.28,15.5", "mobileone_s0,224,4000.0,256.0,1024,5.29,1.05,15.5"]
    table = _table(tmp_path, HEADER + "\n".join(rows) + "\n")
    db = tmp_path / "pub.sqlite"
    assert main(["ingest", "timm-benchmark", str(table), "--db", str(db), "--jobs", "1"]) == 0
    assert "2 rows of reparameterizable models" in capsys.readouterr().out
    with Store(db, create=False) as store:
        assert list(store.published_frame()["reparam"]) == ["yes", "no"]


DLE = (
    Path(__file__).resolve().parent.parent
    / "data"
    / "public"
    / "deeplearningexamples"
    / "pytorch_convnets_inference.csv"
)


def test_deeplearningexamples_rows_enter_a_store_with_their_condition_and_provenance(tmp_path):
    """NVIDIA's tables as shipped: every row kept with its table's heading, commit and the condition NVIDIA's
    configs.yml ran it in (AMP on NHWC, FP32 and TF32 on NCHW, EfficientNet-B4 at 380 px); again: nothing added."""
    db = tmp_path / "dle.sqlite"
    result = ingest([DLE], db, "deeplearningexamples")
    assert result.added == 250 and ingest([DLE], db, "deeplearningexamples").added == 0
    with Store(db, create=False) as store:
        frame = store.published_frame().set_index("source_row")
    first = frame.loc[1]
    assert (first["model"], first["gpu"], first["precision"], first["batch"], first["samples_per_s"]) == (
        "torchvision:resnet50",
        "v100_sxm2",
        "fp32",
        1,
        96.0,
    )
    assert (first["memory_format"], first["backend"], first["resolution"], first["repository"]) == (
        "contiguous",
        "eager",
        224,
        "NVIDIA/DeepLearningExamples",
    )
    assert first["source_path"] == "PyTorch/Classification/ConvNets/resnet50v1.5/README.md (FP32 Inference Latency)"
    assert set(frame.loc[frame["precision"] == "amp", "memory_format"]) == {"channels_last"}
    assert set(frame.loc[frame["model"] == "timm:efficientnet_b4", "resolution"]) == {380}


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            "torchvision:resnet50,h,v100_sxm2,int4,1,96,10,,,,r,p,c,t",
            "row 1: precision 'int4' is none of fp32, tf32, amp",
        ),
        ("torchvision:resnet50,h,no_such_gpu,fp32,1,96,10,,,,r,p,c,t", "row 1: unknown GPU 'no_such_gpu'"),
        ("torchvision:resnet50,h,t4,fp32,0,96,10,,,,r,p,c,t", "row 1: batch must be a whole number above 0"),
    ],
)
def test_a_bad_deeplearningexamples_row_is_one_line_naming_it_and_nothing_is_written(row, message, tmp_path):
    table = tmp_path / "dle.csv"
    table.write_text(DLE.read_text().splitlines()[0] + "\n" + row + "\n")
    with pytest.raises(UsageError, match=re.escape(message)):
        ingest([table], tmp_path / "dle.sqlite", "deeplearningexamples")
    assert not (tmp_path / "dle.sqlite").exists()


def test_ingest_lists_every_format_and_refuses_another(capsys):
    assert main(["ingest", "--help"]) == 0
    assert "deeplearningexamples" in capsys.readouterr().out
    assert main(["ingest", "nosuchformat", str(DLE)]) == 2
    assert "invalid choice 'nosuchformat'; use one of: deeplearningexamples, generic-csv, mlperf, timm-benchmark" in (
        capsys.readouterr().err
    )


GENERIC_HEADER = "gpu,model,resolution,batch,precision,memory_format,backend,samples_per_s,latency_ms,source_path"


def test_a_generic_csv_enters_a_store_with_its_condition_and_provenance(tmp_path):
    table = tmp_path / "mine.csv"
    table.write_text(
        GENERIC_HEADER + "\n"
        "a10,timm:resnet50,224,256,int8,channels_last,tensorrt,5000,51.2,vendor brief p. 3\n"
        "NVIDIA A10,timm:resnet50,224,256,amp,channels_last,eager,1800,,my bench\n"
    )
    db = tmp_path / "r.sqlite"
    assert ingest([table], db, "generic-csv").added == 2 and ingest([table], db, "generic-csv").added == 0
    with Store(db, create=False) as store:
        rows = store.published_frame().set_index("source_row")
    assert list(rows["gpu"]) == ["a10", "a10"] and list(rows["gpu_label"]) == ["a10", "NVIDIA A10"]
    assert (rows.loc[1, "precision"], rows.loc[1, "backend"], rows.loc[1, "step_time_ms"]) == ("int8", "tensorrt", 51.2)
    assert rows.loc[1, "source_path"] == "vendor brief p. 3" and rows.loc[1, "source_file"] == "mine.csv"
    assert pd.isna(rows.loc[2, "step_time_ms"])


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (["a10,timm:resnet50,224,256,fp8,channels_last,eager,5000,,"], "row 1: precision must be one of fp32, "),
        (["a10,timm:resnet50,224,256,amp,nhwc,eager,5000,,"], "row 1: memory_format must be one of channels_last, "),
        (["a10,timm:resnet50,224,256,amp,channels_last,,5000,,"], "row 1: backend must be not empty, got ''"),
        (["no_such_gpu,timm:resnet50,224,256,amp,channels_last,eager,5000,,"], "row 1: unknown GPU 'no_such_gpu'"),
        (["a10,timm:resnet50,224,256,amp,channels_last,eager,-1,,"], "row 1: samples_per_s must be a number above 0"),
        (
            [
                "a10,timm:resnet50,224,256,amp,channels_last,eager,5000,,",
                "a10,timm:resnet50,224,256,amp,channels_last,eager,5100,,",
            ],
            "row 2: the same condition as row 1 (a10, timm:resnet50, 224, 256, amp, channels_last, eager)",
        ),
    ],
)
def test_a_bad_generic_csv_row_is_one_line_naming_it_and_nothing_is_written(rows, message, tmp_path):
    table = tmp_path / "mine.csv"
    table.write_text("\n".join([GENERIC_HEADER, *rows]) + "\n")
    with pytest.raises(UsageError, match=re.escape(message)):
        ingest([table], tmp_path / "r.sqlite", "generic-csv")
    assert not (tmp_path / "r.sqlite").exists()
    table.write_text("gpu,model\na10,timm:resnet50\n")
    with pytest.raises(UsageError, match="is not a generic-csv table: it lacks the columns resolution, batch"):
        ingest([table], tmp_path / "r.sqlite", "generic-csv")


def test_an_int8_row_is_counted_with_the_fp16_traces_flops_and_no_bytes():
    from utilscope.counting import count
    from utilscope.survey.count_cache import count_row

    int8 = count_row("torchvision:resnet18", 64, "int8")
    fp16 = count("torchvision:resnet18", 1, 64, "fp16").total
    assert int8["count_status"] == "ok" and int8["flops_per_sample"] == int(fp16.flops)
    assert int8["bytes_per_sample"] is None  # the counting engine has no int8 tensors
    assert count_row("torchvision:resnet18", 64, "amp")["bytes_per_sample"] == int(fp16.bytes)
