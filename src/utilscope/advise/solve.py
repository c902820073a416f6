"""Choose a layout for every class of a channel graph, blocking classes until all layouts fit together.

Classes get layouts in graph order of their first member; a class with cat or slice members waits until one of them
can be derived (``placement_order``). A blocked class keeps its channels as they are (identity). A class with a cat
or slice member whose sources have layouts takes the layout they give. Any other class is *free* (a conv or linear
layer writes it, and takes any layout): each run of channels is padded to the multiple on its own, cut where slices
downstream cut it and, where its channel count is unaligned, between the groups of the grouped convs that read or
write it, and parts that an already placed neighbour fixes (a slice of it, a cat it joins) are laid out as that
neighbour needs.

Then two checks, to a fixed point: every cat and slice must agree with its classes' layouts, every grouped conv
must find the same layout in each of its groups, and a conv over the channels (ECA) must find zeros after them
(where not, the classes involved are blocked); and a free class is padded only where that aligns some conv or
linear layer.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from torch import fx

from utilscope.advise.channel_graph import Cat, ChannelGraph, Slice, inputs_of
from utilscope.advise.layout import Layout
from utilscope.errors import ModelError

IDLE = "padding it aligns no conv or linear layer"
LAYER_KINDS = ("conv", "linear", "grouped", "depthwise")  # the layers whose speed the padding is for


@dataclass(frozen=True)
class Solution:
    layouts: dict[fx.Node, Layout]  # class root -> layout
    free: frozenset[fx.Node]  # classes whose layout was chosen, not given by a block, a cat or a slice
    blocked: dict[fx.Node, tuple[str, ...]]  # class root -> why it keeps its channels

    def layout(self, graph: ChannelGraph, node: fx.Node) -> Layout:
        return self.layouts[graph.find(node)]

    @property
    def pads_anything(self) -> bool:
        return any(not layout.is_identity for layout in self.layouts.values())


def solve(graph: ChannelGraph, multiple: int) -> Solution:
    classes = graph.classes()
    blocked: dict[fx.Node, tuple[str, ...]] = {}
    for node, reason in graph.blocks.items():
        root = graph.find(node)
        blocked[root] = tuple(dict.fromkeys((*blocked.get(root, ()), reason)))
    derived_users = graph.derived_users()
    order = placement_order(graph, classes)  # blocking changes layouts, not which class can be derived from which
    zeros = zero_padded(graph)  # nor which tensors' padding is zero
    while True:
        solution = assign(graph, classes, order, derived_users, blocked, multiple)
        fresh = conflicts(graph, solution, zeros, multiple) or idle_classes(graph, classes, solution, multiple)
        if not fresh:
            return solution
        for root, reason in fresh.items():
            blocked.setdefault(root, (reason,))


def zero_padded(graph: ChannelGraph) -> set[fx.Node]:
    """The tensors whose padding holds zeros whatever the layouts, by ``zero_rules`` in graph order; a tensor an op
    writes in place only where that op keeps zeros too."""
    spoiled = {source for writer, source in graph.inplace if graph.zero_rules.get(writer) != ("all", (source,))}
    zeros: set[fx.Node] = set()
    for node, (quantifier, inputs) in graph.zero_rules.items():
        if node not in spoiled and (all if quantifier == "all" else any)(i in zeros for i in inputs):
            zeros.add(node)
    return zeros


def assign(
    graph: ChannelGraph, classes: dict, order: list, derived_users: dict, blocked: dict, multiple: int
) -> Solution:
    layouts: dict[fx.Node, Layout] = {}
    free = set()
    for root in order:
        members = classes[root]
        if root in blocked:
            layouts[root] = Layout.identity(graph.channels[root])
        elif (given := derivable(graph, members, layouts, multiple)) is not None:
            layouts[root] = given
        else:
            layouts[root] = free_layout(graph, members, derived_users, layouts, multiple)
            free.add(root)
    return Solution(layouts, frozenset(free), dict(blocked))


def placement_order(graph: ChannelGraph, classes: dict) -> list[fx.Node]:
    """The classes in graph order of their first member, except that a class with cat or slice members waits until
    one of them can be derived (the classes it is made from are placed): GhostNet-V2's gate, computed first,
    multiplies a slice of a cat computed after it; placed first, it would be free, and the slice could not fit it.
    (Waiting for every one would misplace ReXNet's shortcut, a cat of the block before and a slice of this block's
    output.) Where waiting would never end, the first class in graph order not yet placed goes next."""
    roots = list(classes)
    index = {root: position for position, root in enumerate(roots)}
    waiting: dict[tuple[fx.Node, fx.Node], int] = {}  # (class, its cat or slice member) -> sources not yet placed
    users: dict[fx.Node, list[tuple[fx.Node, fx.Node]]] = {}
    ready = []
    for root, members in classes.items():
        derived = [m for m in members if m in graph.derived]
        for member in derived:
            needs = {graph.find(source) for source in inputs_of(graph.derived[member])} - {root}
            waiting[root, member] = len(needs)
            for need in needs:
                users.setdefault(need, []).append((root, member))
        if not derived or any(not waiting[root, m] for m in derived):
            ready.append(index[root])
    heapq.heapify(ready)
    order: list[fx.Node] = []
    placed: set[fx.Node] = set()
    while len(order) < len(roots):
        if not ready:
            heapq.heappush(ready, next(index[root] for root in roots if root not in placed))
        root = roots[heapq.heappop(ready)]
        if root in placed:
            continue
        placed.add(root)
        order.append(root)
        for key in users.get(root, ()):
            waiting[key] -= 1
            if not waiting[key]:
                heapq.heappush(ready, index[key[0]])
    return order


def derive(graph: ChannelGraph, derivation: Cat | Slice, layouts: dict, multiple: int) -> Layout:
    if isinstance(derivation, Cat):
        return Layout.concat(layouts[graph.find(source)] for source in derivation.inputs)
    return layouts[graph.find(derivation.input)].window(derivation.start, derivation.stop, multiple)


def derivable(graph: ChannelGraph, members: list, layouts: dict, multiple: int) -> Layout | None:
    """The layout the first cat or slice member whose sources are placed gives, if any."""
    for member in members:
        derivation = graph.derived.get(member)
        if derivation is not None and all(graph.find(s) in layouts for s in inputs_of(derivation)):
            return derive(graph, derivation, layouts, multiple)
    return None


def free_layout(graph: ChannelGraph, members: list, derived_users: dict, layouts: dict, multiple: int) -> Layout:
    channels = graph.channels[members[0]]
    fixed, cuts = [], set()  # fixed: (start, stop, layout) of channel runs a placed neighbour lays out
    for member in members:
        if channels % multiple:  # an aligned class keeps its groups as they are
            for groups in graph.groups.get(member, ()):
                cuts |= set(range(0, channels, channels // groups))
        for user in derived_users.get(member, ()):
            derivation, placed = graph.derived[user], layouts.get(graph.find(user))
            if isinstance(derivation, Slice) and placed is not None:
                fixed.append((derivation.start, derivation.stop, placed))
            elif isinstance(derivation, Slice):
                cuts |= {derivation.start, derivation.stop}
            elif placed is not None:
                offsets = cat_offsets(graph, derivation)
                fixed += [(0, channels, placed.natural(o, o + channels)) for s, o in offsets if s is member]
        derivation = graph.derived.get(member)
        if isinstance(derivation, Cat):
            for source, offset in cat_offsets(graph, derivation):
                if graph.find(source) in layouts:
                    fixed.append((offset, offset + graph.channels[source], layouts[graph.find(source)]))
    return compose(channels, fixed, cuts, multiple)


def cat_offsets(graph: ChannelGraph, derivation: Cat) -> list[tuple[fx.Node, int]]:
    offsets, offset = [], 0
    for source in derivation.inputs:
        offsets.append((source, offset))
        offset += graph.channels[source]
    return offsets


def compose(channels: int, fixed: list, cuts: set, multiple: int) -> Layout:
    """Fixed runs where given (the first of overlapping ones; the check after solving judges the rest), the
    channels between them padded run by run."""
    pieces, at = [], 0
    for start, stop, layout in sorted(fixed, key=lambda run: run[0]):
        if start < at:
            continue
        pieces += [Layout.padded(at, start, cuts, multiple), layout]
        at = stop
    pieces.append(Layout.padded(at, channels, cuts, multiple))
    return Layout.concat(pieces)


def conflicts(graph: ChannelGraph, solution: Solution, zeros: set[fx.Node], multiple: int) -> dict[fx.Node, str]:
    """Classes to block because a cat or a slice does not fit their layouts, a grouped conv finds other layouts in
    its groups (a blocked class, unpadded, fits every grouped conv), or a conv over the channels finds padding that
    is not ``zeros`` (the tensors whose padding is zero) after them."""
    fresh: dict[fx.Node, str] = {}
    for site in (site for site in graph.sites if site.kind == "grouped"):
        for node in (site.node.args[0], site.node):
            if solution.layout(graph, node).per_group(site.groups) is None:
                fresh.setdefault(graph.find(node), f"layouts differ across the groups of {site.layer}")
    for node, derivation in graph.derived.items():
        layout = solution.layout(graph, node)
        if isinstance(derivation, Cat):
            fits = layout == derive(graph, derivation, solution.layouts, multiple)
        else:
            fits = solution.layout(graph, derivation.input).holds(derivation.start, derivation.stop, layout)
        if fits:
            continue
        roots = dict.fromkeys((graph.find(node), *map(graph.find, inputs_of(derivation))))
        involved = [root for root in roots if root not in solution.blocked]
        if not involved:  # unpadded sources always fit an unpadded cat or slice: this is a bug, not a model
            raise ModelError(f"channel padding found no consistent layout at {node.name}")
        for root in involved:
            fresh.setdefault(root, f"layouts disagree at {node.name}")
    return channel_conv_conflicts(graph, solution, zeros) | fresh


def channel_conv_conflicts(graph: ChannelGraph, solution: Solution, zeros: set[fx.Node]) -> dict[fx.Node, str]:
    """Classes a conv over the channels reads with padding that is not all zeros after them: there the padding
    would take the place of the conv's own zero padding (ECA's gate)."""
    fresh = {}
    for source, conv in graph.channel_convs:
        layout = solution.layout(graph, source)
        at_end = layout.positions == tuple(range(layout.channels))
        if not layout.is_identity and not (at_end and source in zeros):
            fresh[graph.find(source)] = f"{conv.target} convolves over the channels: needs zeros after them"
    return fresh


def idle_classes(graph: ChannelGraph, classes: dict, solution: Solution, multiple: int) -> dict[fx.Node, str]:
    """Free classes that are padded although no conv or linear layer gets aligned by it."""
    helped: set[fx.Node] = set()
    for site in graph.sites:
        if site.kind not in LAYER_KINDS:
            continue
        for node in (site.node.args[0], site.node):
            if graph.channels[node] % multiple and solution.layout(graph, node).width % multiple == 0:
                helped |= sources(graph, classes, graph.find(node))
    idle = [root for root in solution.free if not solution.layouts[root].is_identity and root not in helped]
    return dict.fromkeys(idle, IDLE)


def sources(graph: ChannelGraph, classes: dict, root: fx.Node) -> set[fx.Node]:
    """A class and every class its layout comes from through cats and slices."""
    found, stack = set(), [root]
    while stack:
        current = stack.pop()
        if current in found:
            continue
        found.add(current)
        for member in classes[current]:
            if member in graph.derived:
                stack += [graph.find(s) for s in inputs_of(graph.derived[member])]
    return found
