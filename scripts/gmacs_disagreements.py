"""Why timm's published GMACs and our counted FLOPs / 2 disagree: each disagreement `utilscope ingest` lists,
counted again by fvcore, the counter timm's benchmark script prints its GMACs with.

For every (model, resolution) of a store whose table's GMACs differ from our FLOPs / 2 by more than 5% and the
tables' rounding (``survey.published.gmacs_disagreements``), the model is built at that resolution (random weights, CPU,
fp32, batch 1) and counted by fvcore's ``FlopCountAnalysis`` (one "flop" per multiply-add, as timm prints it), per
operator. The verdict:

- ``fvcore's rules``: fvcore's total agrees with the table, so the table is fvcore's count of this model, and the
  difference is what fvcore counts and we do not (norms, pools, upsampling: one MAC per element, listed with their
  GMACs) or what it skips and we count (the ops it has no handle for that carry MACs: an LSTM, a conv with
  ``padding="same"``, fused attention). Where fvcore skipped fused attention and disagrees with the table, the model
  is counted again with timm's fused attention off (attention as matmuls), as the table's count was;
- ``another model``: fvcore's count of this model differs from the table too, while its conv, linear and matmul part
  agrees with ours: the table's run counted another version of the model (timm's, or its arguments).

Needs fvcore (``pip install fvcore``; not a dependency of utilscope) and the pinned timm (scripts/README.md).

    python3 scripts/gmacs_disagreements.py STORE [--markdown]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from utilscope.models import zoo  # noqa: E402
from utilscope.survey.published import agrees, gmacs_disagreements  # noqa: E402
from utilscope.survey.store import Store  # noqa: E402

MAC_OPS = ("conv", "linear", "matmul", "einsum", "bmm", "addmm", "baddbmm")  # what both count as MACs
# ops fvcore has no handle for that carry MACs in our count (its skipped elementwise ops carry none in either)
SKIPPED_MACS = ("conv", "lstm", "gru", "rnn", "mm", "linear", "einsum", "attention")


def fvcore_gmacs(model: str, resolution: int, fused_attention: bool = True):
    """fvcore's total, its MAC ops' part, its other operators (GMACs each) and the MAC-carrying ops it skipped, of
    the model built with timm's fused attention on (as it runs) or off (attention as two matmuls)."""
    from fvcore.nn import FlopCountAnalysis
    from timm.layers import set_fused_attn

    set_fused_attn(fused_attention)
    module = zoo.build_model(zoo.parse_spec(model), resolution)
    analysis = FlopCountAnalysis(module, torch.zeros(1, 3, resolution, resolution))
    analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False).tracer_warnings("none")
    with contextlib.redirect_stderr(io.StringIO()), torch.no_grad():
        by_op = {op: count / 1e9 for op, count in analysis.by_operator().items()}
    macs = sum(value for op, value in by_op.items() if op in MAC_OPS)
    others = {op: value for op, value in by_op.items() if op not in MAC_OPS and value > 0}
    skipped = sorted(op for op in analysis.unsupported_ops() if any(name in op for name in SKIPPED_MACS))
    return sum(by_op.values()), macs, others, skipped


def explain(row) -> tuple[float, float, str]:
    """fvcore's total and MAC part for a row, and why the table and we differ (see the module's docstring)."""
    total, macs, others, skipped = fvcore_gmacs(row.model, int(row.resolution))
    unfused = ""
    if not agrees(total, row.gmacs) and any("attention" in op for op in skipped):
        total, macs, others, skipped = fvcore_gmacs(row.model, int(row.resolution), fused_attention=False)
        unfused = "attention counted unfused (timm's set_fused_attn(False)), as the table's count; "
    if agrees(total, row.gmacs):
        counted = ", ".join(f"{op} {value:.3g}" for op, value in sorted(others.items(), key=lambda kv: -kv[1]))
        parts = [f"fvcore also counts {counted}" if counted else "", f"skips {', '.join(skipped)}" if skipped else ""]
        return total, macs, f"fvcore's rules: {unfused}" + "; ".join(part for part in parts if part)
    if agrees(macs, row.ours_gmacs):
        return total, macs, "another model: fvcore counts this model as we do, not as the table"
    return total, macs, "unexplained: fvcore agrees with neither"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", help="a store with timm's tables ingested (utilscope ingest timm-benchmark)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with Store(args.store, create=False) as store:
        apart = gmacs_disagreements(store.published_frame())
    lines = [
        "| model | res | table GMACs | ours | ratio | fvcore | fvcore's MAC ops | why |",
        "|---|---:|" + "---:|" * 5 + "---|",
    ]
    for row in apart.itertuples():
        total, macs, why = explain(row)
        cells = [row.model, row.resolution, f"{row.gmacs:g}", f"{row.ours_gmacs:.3g}", f"{row.ratio:.2f}"]
        cells += [f"{total:.3g}", f"{macs:.3g}", why]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
        if not args.markdown:
            print(*cells, sep="  ", flush=True)
    if args.markdown:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
