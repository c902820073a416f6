"""``advise``: measured, exact changes that make a given CNN use the device better, ranked by measured gain."""

from __future__ import annotations

from rich.console import Console

from utilscope.cli.common import EXIT_PARTIAL, add_cudnn_options, cudnn_settings
from utilscope.cli.values import (
    BACKEND,
    BATCHES,
    DEVICE,
    MULTIPLE,
    PRECISION,
    RES,
    backends,
    checked,
    one_model,
    output_folder,
    parse_batches,
    parse_list,
    precisions,
    whole,
)
from utilscope.files import EXPORTED_MODEL
from utilscope.limits import check_batches
from utilscope.present.json_text import strict_json

LADDER = checked(str, lambda text: () if text == "none" else check_batches(parse_batches(text)), "batches")


def add_parsers(sub) -> None:
    p = sub.add_parser("advise", help="measure exact rewrites and deployment choices, ranked by measured gain")
    p.add_argument(
        "model", type=one_model("advise"), help="torchvision:NAME, timm:NAME, path/file.py:factory or archs.jsonl:ID"
    )
    p.add_argument("--batch", type=BATCHES, default=None, help="batch sizes (default: 1,256 on a GPU, 1,8 on a CPU)")
    p.add_argument(
        "--precision",
        type=PRECISION,
        default=None,
        help="the as-given precision (default: fp16 on a GPU, fp32 on CPU)",
    )
    p.add_argument("--backend", type=BACKEND, default="graph", help="the as-given backend (default: %(default)s)")
    p.add_argument("--device", type=DEVICE, default=None, help="cuda, cuda:N or cpu (default: cuda if present)")
    p.add_argument("--res", type=RES, default=None, help="input resolution in pixels (default: the model's native)")
    p.add_argument(
        "--backends",
        type=backends("--backends"),
        default=None,
        help="backends to try (default: graph,inference on a GPU; the as-given one on a CPU)",
    )
    p.add_argument(
        "--precisions",
        type=precisions("--precisions"),
        default=None,
        help="precisions to try, e.g. fp16,bf16,tf32 (default: fp16,bf16 on a GPU; the as-given one on a CPU)",
    )
    p.add_argument(
        "--multiple",
        type=MULTIPLE,
        default=None,
        help="pad channels to a multiple of this (default: the "
        "largest the precisions tried want: 8 for fp16/bf16, 4 for tf32/fp32, 16 for int8)",
    )
    p.add_argument(
        "--ladder",
        type=LADDER,
        default=None,
        help="batch sizes of the saturation ladder (default: 1,2,4,...,512 on a "
        "GPU, 1,...,16 on a CPU; 'none' skips it)",
    )
    p.add_argument(
        "--export",
        type=output_folder(EXPORTED_MODEL),
        default=None,
        metavar="DIR",
        help="write the rewritten model of the best "
        "configuration to DIR/model.pt with DIR/model.py:build (default: no export)",
    )
    p.add_argument(
        "--repeats",
        type=whole("--repeats"),
        default=None,
        help="time each trial this many times; "
        "the median is reported with its range and ranked (default: 3, advisor.REPEATS)",
    )
    p.add_argument("--json", action="store_true", help="print the advice as JSON instead of tables")
    add_cudnn_options(p)
    p.set_defaults(run=cmd_advise)


def cmd_advise(args, console: Console) -> int:
    from utilscope.advise.advisor import AdviseRequest
    from utilscope.api import advise
    from utilscope.measure.settings import MeasureRequest
    from utilscope.present.advise_view import render_advice, trial_line

    measure = MeasureRequest(
        args.model,
        precision=args.precision,
        backend=args.backend,
        device=args.device,
        resolution=args.res,
        cudnn=cudnn_settings(args),
    )
    request = AdviseRequest(
        measure,
        args.batch,
        args.multiple,
        parse_list(args.backends, "--backends"),
        args.precisions or (),
        args.ladder,
        args.export,
        **({} if args.repeats is None else {"repeats": args.repeats}),
    )
    progress = Console(stderr=True, highlight=False)

    def on_trial(trial) -> None:  # one line per trial as it lands, on standard error (beside --json too)
        progress.print(trial_line(trial), soft_wrap=True)

    advice = advise(request, on_trial).advice
    if args.json:
        print(strict_json(advice.to_dict()))
    else:
        render_advice(advice, console)
    given = [t for t in advice.trials if t.kind == "as given"]
    return 0 if all(t.status == "ok" for t in given) else EXIT_PARTIAL  # a batch size with nothing to compare to
