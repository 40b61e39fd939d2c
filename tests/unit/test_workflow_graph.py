"""The workflow graph's layout (`jobs.admin.workflow_graph`): pure geometry, no database.

What the admin page promises from it: every dependency drawn before its
dependent, no two boxes on top of each other, a wide fan-out still one page
wide, crossings cut where an order without them exists, and above the limit a
summary by layer that stays small however many steps there are.
"""

from __future__ import annotations

import itertools
import re
import uuid

from jobs.admin import workflow_graph
from jobs.admin.workflow_graph import DOWN, RIGHT, Box, Node, draw, layers


def node(name: str, *after: Node, state: str = "queued") -> Node:
    return Node(
        id=uuid.uuid4(),
        name=name,
        state=state,
        url=f"/job/{name}/",
        title=name,
        after=tuple(dep.id for dep in after),
    )


def overlap(a: Box, b: Box) -> bool:
    across = a.x < b.x + b.width and b.x < a.x + a.width
    return across and a.y < b.y + b.height and b.y < a.y + a.height


def boxes_crossed(d: str, picture: workflow_graph.Picture) -> list[str]:
    """The boxes a path's straight runs (its "L" parts, along a lane through a
    layer) pass through; its curves only cross the gaps between layers."""
    crossed, previous = [], (0.0, 0.0)
    for command in re.findall(r"[MCL][^MCL]*", d):
        end = tuple(float(v) for v in command[1:].split()[-1].split(","))
        if command[0] == "L":
            (x1, y1), (x2, y2) = previous, end
            for box in picture.boxes:
                if picture.direction == RIGHT:
                    inside = (
                        box.y < y1 < box.y + box.height and x1 < box.x + box.width and box.x < x2
                    )
                else:
                    inside = (
                        box.x < x1 < box.x + box.width and y1 < box.y + box.height and box.y < y2
                    )
                if inside:
                    crossed.append(box.node.name)
        previous = (end[0], end[1])
    return crossed


def assert_well_drawn(nodes: list[Node]) -> workflow_graph.Picture:
    picture = draw(nodes)
    boxes = {box.node.id: box for box in picture.boxes}
    assert set(boxes) == {n.id for n in nodes}, "every step is drawn as a box"
    for first, second in itertools.combinations(picture.boxes, 2):
        assert not overlap(first, second), f"{first.node.name} and {second.node.name} overlap"
    for box in picture.boxes:
        assert box.x >= 0, f"{box.node.name} starts inside the picture"
        assert box.y >= 0, f"{box.node.name} starts inside the picture"
        assert box.x + box.width <= picture.width, f"{box.node.name} fits across"
        assert box.y + box.height <= picture.height, f"{box.node.name} fits down"
    for n in nodes:
        for dep in n.after:
            assert boxes[dep].layer < boxes[n.id].layer, "a dependency is in an earlier layer"
            if picture.direction == RIGHT:
                assert boxes[dep].x + boxes[dep].width < boxes[n.id].x, "dependencies are left"
            else:
                assert boxes[dep].y + boxes[dep].height < boxes[n.id].y, "dependencies are above"
    for edge in picture.edges:
        crossed = boxes_crossed(edge.d, picture)
        assert not crossed, f"an arrow runs through {crossed}"
    edges = {(edge.source, edge.target) for edge in picture.edges}
    assert edges == {(dep, n.id) for n in nodes for dep in n.after}, "every edge is drawn once"
    return picture


def test_each_step_is_one_layer_past_its_deepest_dependency():
    """Longest-path layers: a step waiting on a chain and on a root sits past the chain."""
    root = node("root")
    middle = node("middle", root)
    end = node("end", middle, root)
    alone = node("alone")
    assert layers([end, middle, root, alone]) == {end.id: 2, middle.id: 1, root.id: 0, alone.id: 0}


def test_layers_respect_every_edge_and_no_boxes_overlap_in_a_mixed_graph():
    """A fan-out, a fan-in, an edge skipping layers and a lone step, drawn without overlap."""
    fetch = node("orders.fetch:42")
    small = node("img.resize:42-small", fetch)
    large = node("img.resize:42-large", fetch)
    notify = node("orders.notify:42", small, large)
    report = node("orders.report:42", small, large, fetch)
    audit = node("audit", notify, report)
    alone = node("alone")
    assert_well_drawn([fetch, small, large, notify, report, audit, alone])


def test_a_wide_fan_out_of_fifty_steps_runs_left_to_right_and_fits_the_page_width():
    """One step, 48 in parallel after it, one after them all: three columns, 48 rows,
    no wider than the admin's content at 1280 px, so nothing is scaled down."""
    start = node("start")
    middle = [node(f"resize-{index}", start) for index in range(48)]
    end = node("end", *middle)
    picture = assert_well_drawn([start, *middle, end])
    assert picture.direction == RIGHT, "a graph wider than deep runs left to right"
    assert picture.width <= 900, f"three layers fit the page's width, not {picture.width}"
    assert not picture.summary


def test_a_chain_of_fifty_steps_runs_down_the_page_in_one_column():
    chain: list[Node] = []
    for index in range(50):
        chain.append(node(f"step-{index}", *chain[-1:]))
    picture = assert_well_drawn(chain)
    assert picture.direction == DOWN, "a graph deeper than wide runs top to bottom"
    assert picture.width <= 300, "a chain is one column wide"


def test_the_sweeps_untangle_a_crossing_that_an_order_without_one_avoids():
    """a→y and b→x, added so that the first order crosses: the barycentre swaps them."""
    a, b = node("a"), node("b")
    x, y = node("x", b), node("y", a)
    picture = assert_well_drawn([a, b, x, y])
    across = {box.node.name: box.y for box in picture.boxes}
    assert (across["a"] < across["b"]) == (across["y"] < across["x"]), (
        "each step is drawn level with the one it waits for, so the two edges do not cross"
    )


def test_a_long_name_is_cut_with_an_ellipsis_and_kept_whole_in_the_node():
    long = node("x" * 80)
    (box,) = draw([long]).boxes
    assert box.label.endswith("…"), "a cut name ends in an ellipsis"
    assert len(box.label) == workflow_graph.LABEL_CHARS, "it is cut to what a box shows"
    assert box.node.name == "x" * 80, "the whole name stays for the tooltip"


def test_above_the_limit_the_picture_is_a_summary_by_layer_with_counts_by_state():
    """10,000 steps: no box per step, a bar per layer counting its steps by state."""
    root = node("root", state="done")
    fan = [
        node(f"s-{index}", root, state="running" if index % 3 else "waiting")
        for index in range(9_998)
    ]
    end = node("end", *fan[:10], state="waiting")
    picture = draw([root, *fan, end])
    assert picture.summary, "above the limit the picture is a summary"
    assert not picture.boxes, "above the limit no step has its own box"
    assert [band.steps for band in picture.bands] == [1, 9_998, 1], "a bar per layer"
    assert {part.state: part.count for part in picture.bands[1].parts} == {
        "running": 6_665,
        "waiting": 3_333,
    }, "the middle layer's steps are counted by state"
    assert picture.steps == 10_000


def test_a_summary_of_a_very_deep_graph_groups_its_layers_into_bands():
    chain: list[Node] = []
    for index in range(1_000):
        chain.append(node(f"step-{index}", *chain[-1:]))
    picture = draw(chain)
    assert picture.summary
    assert len(picture.bands) <= workflow_graph.MAX_BANDS, "at most MAX_BANDS bars"
    assert sum(band.steps for band in picture.bands) == 1_000, "every step is counted once"
    assert picture.bands[0].label == "layers 1 to 17"


def test_an_arrow_skipping_a_layer_goes_around_the_box_between():
    """a→b→c and a→c: the straight line from a to c would cross b, the arrow
    takes the gap beside it instead."""
    a = node("a")
    b = node("b", a)
    c = node("c", b, a)
    d = node("d", c)
    picture = draw([a, b, c, d])
    assert picture.direction == DOWN
    (skipping,) = [edge for edge in picture.edges if edge.source == a.id and edge.target == c.id]
    assert "L" in skipping.d, "it runs along a lane through b's layer"
    assert not boxes_crossed(skipping.d, picture), "and not through b"
    assert_well_drawn([a, b, c, d])
