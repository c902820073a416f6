"""What a GPU sustains under a CNN's load, from its datasheet alone: the SM clock its board power allows, and the
share of its memory bandwidth a streaming op reaches (docs/predict.md, "The GPUs people rent").

**Clock.** A GPU's boost clock is what it runs at when its board power allows; a board whose power limit is low for
its SM count and chip runs its SMs below it under a heavy load (a 70 W T4, a 300 W RTX PRO 6000 Max-Q). Dynamic
power is C·V²·f and, in the boost range, the voltage rises with the clock, so an SM's power grows as f³
(``POWER_EXPONENT``). Within a chip family (one compute capability: one process, one SM design) the *reference* is
the row with the most board power per SM and boost MHz, taken to hold its boost clock under load; another row of the
family sustains the clock at which its board power per SM equals the reference's scaled by f³:

    f = f_ref x (P / n_SM / (P_ref / n_ref_SM)) ^ (1 / 3),  held between its base clock and its boost clock.

The base clock, where the vendor publishes one, is the clock it guarantees at its board power: never below it. A
row whose board power is shared with a CPU (``tdp_shared``: GH200) is taken at its boost clock and is never a
reference. The clock is "estimated" where it comes out below the boost clock.

**Memory.** A streaming op's share of the datasheet bandwidth by memory technology (``MEMORY_EFFICIENCY``): the
same for every row of a technology, nothing per GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from utilscope.hardware.specs import DeviceSpec, load_specs

POWER_EXPONENT = 3.0  # board power per SM grows as the clock cubed (C·V²·f with V rising with f)
# The share of the datasheet bandwidth a streaming op reaches (reads and writes together), by technology: HBM the
# H200's own measured copy (`utilscope ceilings`: 4.18 of 4.8 TB/s); GDDR6X and GDDR7 chosen on the validation tables
# (docs/predict.md); GDDR6, on no validation GPU, GDDR6X's; GDDR5 and GDDR5X (Kepler, Maxwell, Pascal), on no
# validation GPU either and measured on none, GDDR6's.
MEMORY_EFFICIENCY = {
    "HBM2": 0.87,
    "HBM2e": 0.87,
    "HBM3": 0.87,
    "HBM3e": 0.87,
    "GDDR5": 0.95,
    "GDDR5X": 0.95,
    "GDDR6": 0.95,
    "GDDR6X": 0.95,
    "GDDR7": 0.76,
}


@dataclass(frozen=True)
class Sustained:
    """A GPU's sustained SM clock (MHz) and memory efficiency, and how the clock was obtained."""

    clock_mhz: float
    boost_mhz: float
    memory_efficiency: float
    reference: str = ""  # the family's reference row the clock was scaled from ("" when it is the boost clock)

    @property
    def estimated(self) -> bool:
        return self.clock_mhz < self.boost_mhz

    def describe(self, spec: DeviceSpec) -> str:
        """One line: the clock assumed and why, and the memory's efficiency."""
        memory = f"{spec.memory_technology} at {self.memory_efficiency:.2f} of {spec.memory_bandwidth_gbs:g} GB/s"
        if not self.estimated:
            return f"{spec.key}: boost clock {self.boost_mhz:.0f} MHz; {memory}"
        return (
            f"{spec.key}: sustained clock {self.clock_mhz:.0f} MHz estimated under its {spec.tdp_w:g} W board power "
            f"(boost {self.boost_mhz:.0f} MHz; scaled from {self.reference}); {memory}"
        )


def power_per_sm_mhz(spec: DeviceSpec) -> float:
    """Board watts per SM per boost MHz: how much of its boost clock a row's power can feed."""
    return spec.tdp_w / spec.sm_count / spec.boost_clock_mhz


def reference_of(spec: DeviceSpec, specs: list[DeviceSpec] | None = None) -> DeviceSpec:
    """The row of the spec's chip family (compute capability) with the most board power per SM and boost MHz,
    among rows whose board power is their own."""
    rows = [
        row
        for row in (load_specs() if specs is None else specs)
        if row.compute_capability == spec.compute_capability and not row.tdp_shared
    ]
    return max(rows or [spec], key=power_per_sm_mhz)


def sustained(spec: DeviceSpec, specs: list[DeviceSpec] | None = None) -> Sustained:
    """The spec's sustained clock and memory efficiency (the module's docstring)."""
    efficiency = MEMORY_EFFICIENCY[spec.memory_technology]
    boost = spec.boost_clock_mhz
    if spec.tdp_shared:
        return Sustained(boost, boost, efficiency)
    reference = reference_of(spec, specs)
    watts_per_sm = spec.tdp_w / spec.sm_count
    reference_watts_per_sm = reference.tdp_w / reference.sm_count
    clock = reference.boost_clock_mhz * (watts_per_sm / reference_watts_per_sm) ** (1 / POWER_EXPONENT)
    clock = min(max(clock, spec.base_clock_mhz or 0.0), boost)
    return Sustained(clock, boost, efficiency, reference.key if clock < boost else "")
