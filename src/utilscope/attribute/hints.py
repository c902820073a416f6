"""Hints: the diagnosis's findings grouped per rule — the advice once, what it covers, and the time at stake.

A rule that flags ten layers for the same reason is one hint, not ten copies of one paragraph: its advice, the
layers (fused regions, SE blocks) it covers, biggest first, each with its own evidence where the rule gives some,
and their time share together, a fused region counted once. Hints are ordered by that time share, biggest first.
"""

from __future__ import annotations

from dataclasses import dataclass

from utilscope.attribute.diagnose import Context, Finding, Thresholds, diagnose
from utilscope.attribute.records import Attribution


@dataclass
class Hint:
    rule: str
    time_share: float  # at stake: share of the end-to-end time of what the hint covers
    advice: str  # what would change it, for this run's device, backend and precision
    evidence: str | None  # the network-level evidence, for rules that speak for the whole network
    layers: list[str]  # what it covers: layers, fused regions or SE blocks, biggest first
    details: list[Finding]  # per-layer findings with their evidence, biggest first (may be fewer than ``layers``)

    def to_dict(self) -> dict:
        """The hint as ``utilscope layers --json`` lists it under ``findings``."""
        return {
            "rule": self.rule,
            "time_share": self.time_share,
            "advice": self.advice,
            "evidence": self.evidence,
            "layers": list(self.layers),
            "details": [
                {"layer": f.layer, "op_class": f.op_class, "time_share": f.time_share, "evidence": f.evidence}
                for f in self.details
            ],
        }


def group_findings(findings: list[Finding], context: Context) -> list[Hint]:
    """One hint per rule, biggest time at stake first (ties: in rule order)."""
    by_rule: dict[str, list[Finding]] = {}
    for finding in findings:
        by_rule.setdefault(finding.rule, []).append(finding)
    grouped = [_hint(rule, members, context) for rule, members in by_rule.items()]
    return sorted(grouped, key=lambda hint: -hint.time_share)


def _hint(rule: str, members: list[Finding], context: Context) -> Hint:
    network = next((f for f in members if f.layer is None), None)
    details = sorted((f for f in members if f.layer is not None), key=lambda f: -f.time_share)
    if network is not None:  # the network-level finding covers every layer the rule counts
        covered = network.covers or [f.layer for f in details]
        return Hint(rule, network.time_share, network.advice, network.evidence, covered, details)
    return Hint(rule, at_stake(details, context), details[0].advice, None, [f.layer for f in details], details)


def at_stake(details: list[Finding], context: Context) -> float:
    """The time share of per-layer findings together: layers charged their fused region's time share it once."""
    charged: dict[str, float] = {}
    for finding in details:
        charged[context.region_of.get(finding.layer, finding.layer)] = finding.time_share
    return sum(charged.values())


def hints(attribution: Attribution, thresholds: Thresholds | None = None, rules: str = "*") -> list[Hint]:
    """The rules matching ``rules`` run on ``attribution``, their findings grouped per rule."""
    return group_findings(diagnose(attribution, thresholds, rules), Context.build(attribution, thresholds))


__all__ = ["Hint", "at_stake", "group_findings", "hints"]
