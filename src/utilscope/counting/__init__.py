"""Per-layer accounting of what a model asks of the hardware: FLOPs, other FLOPs, bytes, params, op class."""

from utilscope.counting.classify import OpClass
from utilscope.counting.counter import DTYPES, CountResult, LayerCount, Totals, count

__all__ = ["DTYPES", "CountResult", "LayerCount", "OpClass", "Totals", "count"]
