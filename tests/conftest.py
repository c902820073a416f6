"""Fixtures the test files share: tiny factory-file models, a quick timing plan, a recorder of cuDNN's settings."""

from __future__ import annotations

import importlib.util
import os
import textwrap
from pathlib import Path

import pytest
import torch

from utilscope.measure.timing import TimingPlan

QUICK = TimingPlan(warmup_iters=2, warmup_ms=1, samples=3, min_total_ms=3)

# conv 3->8 3x3 at 16x16: 2*8*16*16*27 = 110592 FLOPs; linear 8->4: 2*8*4 = 64 FLOPs per sample
TINY_SOURCE = """
import torch.nn as nn
RESOLUTION = 16


def make():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
"""
TINY_FLOPS = 110_592 + 64


def load_script(relative: str):
    """A script of the repository (``scripts/`` and ``benchmarks/`` are not packages), loaded as a module by its path
    relative to the repository's root, anew on every call."""
    path = Path(__file__).resolve().parent.parent / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def randomized(model: torch.nn.Module) -> torch.nn.Module:
    """Eval mode with batch norms that are not the identity, so that padding and folding them is exercised."""
    torch.manual_seed(0)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            torch.nn.init.uniform_(module.weight, 0.5, 1.5)
            torch.nn.init.uniform_(module.bias, -0.5, 0.5)
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
    return model.eval()


CACHE_VARIABLES = (
    "UTILSCOPE_CACHE_DIR",
    "XDG_CACHE_HOME",
    "MPLCONFIGDIR",
    "TORCHINDUCTOR_CACHE_DIR",
    "TRITON_CACHE_DIR",
)


# A Ray address in the environment (a developer's cluster) must not decide where the tests' Ray work runs: each Ray
# test starts the Ray it needs (a survey joins a cluster only when asked; `ray.init` would otherwise join this one).
os.environ.pop("RAY_ADDRESS", None)

if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    # xdist's workers share the cores: one torch thread each, in the worker processes they start too (threads
    # that outnumber the cores spin-wait on each other and slowed the suite by a fifth)
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)

# The files that take longest (worker subprocesses, Ray, the registries), longest first: with `--dist loadfile
# --no-loadscope-reorder` the two xdist workers start on them and fill in with the short files, so they finish
# together instead of one starting a 70 s file near the end.
LONGEST_FIRST = ("test_ray.py", "test_survey.py", "test_nas_predictor.py", "test_counting_models.py")


def pytest_collection_modifyitems(items):
    rank = {name: position for position, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


@pytest.fixture(scope="session", autouse=True)
def isolated_caches(tmp_path_factory):
    """Every cache the suite (and the worker processes it starts) writes lives in a temporary folder, never in the
    user's ``~/.cache``: utilscope's ceilings, matplotlib's and inductor's caches."""
    root = tmp_path_factory.mktemp("caches")
    with pytest.MonkeyPatch.context() as patch:
        for name in CACHE_VARIABLES:
            patch.setenv(name, str(root / name.lower()))
        yield root


@pytest.fixture(scope="session")
def write_factory(tmp_path_factory):
    """``write_factory(source, name="models")`` -> the path of a new factory file holding ``source``."""

    def write(source: str, name: str = "models"):
        path = tmp_path_factory.mktemp("factory") / f"{name}.py"
        path.write_text(textwrap.dedent(source))
        return path

    return write


@pytest.fixture(scope="session")
def tiny(write_factory) -> str:
    """The model spec of a tiny CNN (``TINY_FLOPS`` FLOPs per sample at its native 16x16)."""
    return f"{write_factory(TINY_SOURCE, 'tiny')}:make"


class ConvRecorder(torch.overrides.TorchFunctionMode):
    """Records (groups, cudnn.benchmark, cudnn.benchmark_limit) at every conv2d call."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.nn.functional.conv2d:
            groups = args[6] if len(args) > 6 else (kwargs or {}).get("groups", 1)
            cudnn = torch.backends.cudnn
            self.calls.append((groups, cudnn.benchmark, cudnn.benchmark_limit))
        return func(*args, **(kwargs or {}))


@pytest.fixture()
def cudnn_flags():
    """Restores cuDNN's global flags after a test that sets them."""
    cudnn = torch.backends.cudnn
    saved = cudnn.benchmark, cudnn.benchmark_limit
    yield
    cudnn.benchmark, cudnn.benchmark_limit = saved
