"""Survey planning: a grid (models x batch sizes x precisions x backends, in one configuration) minus the cells a
store already holds, as groups of cells for workers (one model, precision and backend, several batch sizes); a
``Shard`` of the grid keeps the groups that fall in it, so that N machines can measure one grid in N stores."""

from __future__ import annotations

from dataclasses import dataclass, field

from utilscope import hardware
from utilscope.errors import UsageError
from utilscope.limits import check_batch, check_threads
from utilscope.measure.backends import get_backend
from utilscope.measure.environment import environment
from utilscope.measure.precision import check_precision, parse_precision
from utilscope.measure.settings import CudnnSettings
from utilscope.measure.sweep import default_precision
from utilscope.models import sets as model_sets
from utilscope.models import zoo
from utilscope.survey.schema import CellKey, Configuration
from utilscope.survey.shards import Shard
from utilscope.survey.store import Store

DEFAULT_BATCHES = (1, 8, 32, 128, 256)


@dataclass(frozen=True)
class SurveyGrid:
    """What to measure, checked when made. ``precisions`` empty: the device's default (fp16 on a GPU, fp32 on a
    CPU); ``resolution`` None: each model's native one; ``retry_errors``: error rows are measured again; ``shard``:
    the share of the grid's groups this run measures (default the whole grid); ``threads``: torch's intra-op thread
    count the workers measure with (None: torch's own where the grid is planned; a CPU cell's key holds it, a GPU
    cell's does not)."""

    models: tuple[str, ...]
    batches: tuple[int, ...] = DEFAULT_BATCHES
    precisions: tuple[str, ...] = ()
    backends: tuple[str, ...] = ("graph",)
    device: str | None = None
    resolution: int | None = None
    channels_last: bool = True
    cudnn: CudnnSettings = field(default_factory=CudnnSettings)
    retry_errors: bool = True
    shard: Shard = field(default_factory=Shard)
    threads: int | None = None

    def __post_init__(self) -> None:
        for name in ("models", "batches", "precisions", "backends"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not self.models or not self.batches:
            raise UsageError("the survey grid is empty: give at least one model and one batch size")
        for batch in self.batches:
            check_batch(batch)
        for precision in self.precisions:
            parse_precision(precision)
        if not self.backends:
            raise UsageError("give at least one backend")
        for backend in self.backends:
            self.cudnn.check_backend(get_backend(backend).name)
        if self.resolution is not None:
            zoo.check_resolution(self.resolution)
        if not isinstance(self.shard, Shard):
            raise UsageError(f"a grid's shard must be a Shard, got {type(self.shard).__name__}")
        check_threads(self.threads)


@dataclass(frozen=True)
class Group:
    """The cells one worker measures: one model, precision and backend, several batch sizes."""

    model: str  # the model's id, as the store keys its cells
    resolution: int
    precision: str
    backend: str
    batches: tuple[int, ...]
    spec: str = ""  # how a worker names the model to build it ("" : the id); a NAS architecture: its file and id

    def keys(self, config: Configuration) -> list[CellKey]:
        return [CellKey(self.model, self.resolution, b, self.precision, self.backend, config) for b in self.batches]

    def only(self, batches) -> Group:
        return Group(self.model, self.resolution, self.precision, self.backend, tuple(batches), self.spec)


@dataclass(frozen=True)
class Target:
    """Where a plan's cells are measured, and in which configuration: this machine ("local"), or one kind of node
    of a cluster (a GPU type such as "H100", or "cpu"), with the resources a task there asks for."""

    label: str
    config: Configuration
    precisions: tuple[str, ...]  # the grid's, or the device's default
    resources: tuple[tuple[str, float], ...] = ()  # e.g. (("accelerator_type:H100", 0.001),)


@dataclass
class SurveyPlan:
    grid: SurveyGrid
    config: Configuration  # the configuration every cell is keyed with
    groups: list[Group]
    skipped: int  # cells already in the store
    target: Target | None = None  # None: this machine

    @property
    def cells(self) -> int:
        return sum(len(g.batches) for g in self.groups)


def split_resolution(text: str) -> tuple[str, int | None]:
    """A model at a resolution of its own: ``"timm:resnet50@288"`` -> ``("timm:resnet50", 288)``; a text without
    ``@DIGITS`` at its end -> ``(text, None)``."""
    head, sep, tail = text.rpartition("@")
    if sep and tail.isdigit():
        return head, zoo.check_resolution(int(tail))
    return text, None


def read_model_list(path) -> list[str]:
    """The models a text file lists, one per line as ``--models`` takes them (``#`` starts a comment); a missing,
    empty or comment-only file is a one-line UsageError."""
    from utilscope.files import MODEL_LIST, read_text

    lines = [line.split("#", 1)[0].strip() for line in read_text(path, MODEL_LIST).splitlines()]
    models = [line for line in lines if line]
    if not models:
        raise UsageError(f"{path} lists no model (one per line; # starts a comment)")
    return models


def select_models(patterns: list[str], families: list[str], sets: list[str] = ()) -> list[str]:
    """Model ids from names/globs (each may end in ``@RES``: every model it names at that resolution), family names
    and named sets; none given: the curated default survey."""
    if not patterns and not families and not sets:
        return model_sets.default_survey()
    ids = []
    for pattern in patterns:
        text, resolution = split_resolution(pattern)
        suffix = "" if resolution is None else f"@{resolution}"
        ids += [spec.id + suffix for spec in zoo.expand_models([text])]
    for name in sets:
        ids += model_sets.set_members(name)
    candidates = zoo.list_models("torchvision:*") + zoo.list_models("timm:*")
    for family in families:
        ids += model_sets.models_of_family(family, candidates)
    return list(dict.fromkeys(ids))


def grid_configuration(grid: SurveyGrid) -> tuple[Configuration, tuple[str, ...]]:
    """The configuration this machine measures the grid in (on a CPU, with the grid's thread count, else torch's
    here), and the grid's precisions (checked on the device)."""
    dev = hardware.resolve_device(grid.device)
    precisions = grid.precisions or (default_precision(dev),)
    for precision in precisions:
        check_precision(parse_precision(precision), dev)
    env = environment(dev, precisions[0], grid.backends[0], grid.channels_last, grid.cudnn, grid.threads)
    return Configuration.from_environment(env), precisions


def local_target(grid: SurveyGrid) -> Target:
    """This machine, in the configuration it measures the grid in (precisions checked on its device)."""
    return Target("local", *grid_configuration(grid))


def expand_grid(grid: SurveyGrid, target: Target | None = None) -> tuple[Configuration, list[Group]]:
    """Every group of the grid's shard (of the whole grid by default), in the configuration of ``target``
    (default: this machine's): models resolved, resolutions and precisions checked. A model given as ``NAME@RES``
    is measured at RES, the others at the grid's resolution (or their native one). Touches no store, so bad input
    never creates one. A factory file's model is checked too (imported, its factory found; not built): a dry run
    says what the run would."""
    target = target or local_target(grid)
    config, precisions = target.config, target.precisions
    groups = []
    for model in grid.models:
        text, own_resolution = split_resolution(model)
        spec = zoo.parse_spec(text)
        zoo.check_model(spec)
        res = zoo.resolve_resolution(spec, own_resolution or grid.resolution)
        portable = zoo.portable_spec(spec)
        groups += [
            Group(spec.id, res, precision, backend, grid.batches, portable)
            for precision in precisions
            for backend in grid.backends
        ]
    return config, grid.shard.select(groups)


def plan_survey(
    grid: SurveyGrid,
    store: Store,
    expanded: tuple[Configuration, list[Group]] | None = None,
    target: Target | None = None,
) -> SurveyPlan:
    """The grid (``expanded`` when already expanded, for ``target``) without the cells the store holds. Raises on
    bad input."""
    config, groups = expanded or expand_grid(grid, target)
    done = store.done_keys(retry_errors=grid.retry_errors)
    todo = [group.only(key.batch for key in group.keys(config) if key not in done) for group in groups]
    planned = [group for group in todo if group.batches]
    skipped = len(groups) * len(grid.batches) - sum(len(group.batches) for group in planned)
    return SurveyPlan(grid, config, planned, skipped, target)
