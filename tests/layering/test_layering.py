"""The module's files call each other in one direction only: down the layers of
docs/architecture.md, never round a circle. Read from the objects `make module` built in
kernel/ (their `nm` symbols: layering.py), and shown able to fail on synthetic `nm` output.

Host-only. Without built objects (or with objects older than their sources) the real-object
tests are skipped, or fail under TBV_STRICT=1; `make test-host` builds the module first."""

from __future__ import annotations

import os

import pytest

import layering

# One received frame, ring to CQE (docs/architecture.md, "Layers"): each step is a call.
RX_PATH = [
    ("tbv_rail", "tbv_recv"),        # NAPI poll -> RX dispatch
    ("tbv_recv", "tbv_stripe_rx"),   # a striped QP's packet: resequencing
    ("tbv_stripe_rx", "tbv_deliver"),
    ("tbv_recv", "tbv_deliver"),     # any other QP's
    ("tbv_deliver", "tbv_resp"),     # a request -> the responder
    ("tbv_resp", "tbv_cq"),          # its receive completion
    ("tbv_deliver", "tbv_comp"),     # an ACK or READ response -> the completer
    ("tbv_comp", "tbv_req"),         # which completes the send WQE ...
    ("tbv_req", "tbv_cq"),           # ... on the send CQ
    ("tbv_deliver", "tbv_tx"),       # then the QP's transmitter runs
]

TRANSPORT = ["tbv_post", "tbv_qp", "tbv_recv", "tbv_stripe_rx", "tbv_deliver", "tbv_tx",
             "tbv_comp", "tbv_resp", "tbv_req", "tbv_xmit", "tbv_stripe", "tbv_pool",
             "tbv_flow", "tbv_netdev", "tbv_rail", "tbv_mcast", "tbv_srq"]


def missing(what: str) -> None:
    if os.environ.get("TBV_STRICT") == "1":
        pytest.fail(f"{what} (TBV_STRICT=1: missing prerequisites fail)", pytrace=False)
    pytest.skip(what)


@pytest.fixture(scope="module")
def built() -> dict[str, str]:
    """The nm output of each object of the module, built and newer than its source."""
    outputs = {}
    for name in layering.kbuild_objects():
        obj = layering.KERNEL / f"{name}.o"
        src = obj.with_suffix(".c")
        if not obj.exists():
            missing(f"{obj} is not built: run make module")
        if obj.stat().st_mtime < src.stat().st_mtime:
            missing(f"{obj} is older than {src.name}: run make module")
        outputs[name] = layering.nm_outputs({name: obj})[name]
    return outputs


def doc_layers(names) -> list[list[str]]:
    return layering.parse_layers(layering.ARCHITECTURE.read_text(),
                                 [n for n in names if n.startswith("proto/")])


# ---- the module as built ----

def test_no_file_calls_back_into_a_file_that_calls_it(built) -> None:
    graph = layering.build_graph(built)
    assert set(TRANSPORT) <= set(graph), "a transport file is not in the module"
    assert sum(len(callees) for callees in graph.values()) > 50, "suspiciously few calls: nm?"
    assert layering.cycles(graph) == []


def test_every_call_goes_down_the_layers_of_the_architecture_doc(built) -> None:
    layers = doc_layers(built)
    placed = [name for layer in layers for name in layer]
    assert len(placed) == len(set(placed)), "a file is in two layers of docs/architecture.md"
    assert set(built) - set(placed) == set(), "files missing from docs/architecture.md's layers"
    assert layering.calls_up(layering.build_graph(built), layers) == []


def test_a_received_frame_goes_down_from_the_ring_to_the_cqe(built) -> None:
    graph = layering.build_graph(built)
    level = {name: i for i, layer in enumerate(doc_layers(built)) for name in layer}
    for caller, callee in RX_PATH:
        assert callee in graph[caller], f"{caller} no longer calls {callee}: update the doc"
        assert level[caller] < level[callee], f"{caller} -> {callee} does not go down"


def test_a_back_call_added_to_the_built_objects_is_caught(built) -> None:
    """The frame code calling the transmitter back (tbv_xmit.c -> tbv_qp_kick()) closes a circle."""
    outputs = dict(built)
    outputs["tbv_xmit"] += "                 U tbv_qp_kick\n"
    graph = layering.build_graph(outputs)
    circles = layering.cycles(graph)
    assert len(circles) == 1 and {"tbv_xmit", "tbv_tx", "tbv_req"} <= set(circles[0])
    assert layering.calls_up(graph, doc_layers(built)) == ["tbv_xmit -> tbv_tx"]


# ---- synthetic nm output: the check itself ----

def nm(defined: list[str], undefined: list[str], local: list[str] = ()) -> str:
    lines = [f"0000000000000000 T {s}" for s in defined]
    lines += [f"0000000000000010 t {s}" for s in local]
    lines += [f"                 U {s}" for s in undefined]
    return "\n".join(lines) + "\n"


def test_a_call_back_up_makes_a_cycle_and_a_call_up() -> None:
    outputs = {
        "tbv_tx": nm(["tbv_qp_kick"], ["tbv_pool_get", "kmalloc"]),
        "tbv_pool": nm(["tbv_pool_get"], ["tbv_qp_kick", "queue_work_on"]),  # the back-call
    }
    graph = layering.build_graph(outputs)
    assert graph == {"tbv_tx": {"tbv_pool"}, "tbv_pool": {"tbv_tx"}}
    assert layering.cycles(graph) == [["tbv_pool", "tbv_tx"]]
    assert layering.calls_up(graph, [["tbv_tx"], ["tbv_pool"]]) == ["tbv_pool -> tbv_tx"]


def test_a_circle_through_several_files_is_found_and_nothing_else() -> None:
    outputs = {
        "a": nm(["a_f"], ["b_f"]),
        "b": nm(["b_f"], ["c_f"]),
        "c": nm(["c_f"], ["a_f", "d_f"]),
        "d": nm(["d_f"], []),
        "e": nm(["e_f"], ["d_f", "a_f"]),
    }
    graph = layering.build_graph(outputs)
    assert layering.cycles(graph) == [["a", "b", "c"]]
    assert layering.calls_up(graph, [["e"], ["a"], ["b"], ["c"], ["d"]]) == ["c -> a"]


def test_the_same_layer_and_pointers_are_no_call_up() -> None:
    """Files in one layer may call each other; a local symbol, a kernel symbol or a call
    through a pointer (no undefined symbol at all) make no edge."""
    outputs = {
        "mw": nm(["mw_f"], ["mr_f", "spin_lock"]),
        "mr": nm(["mr_f"], ["mr_local"]),
        "pool": nm(["pool_put"], [], local=["mr_local"]),  # its own static: not mr's callee
    }
    graph = layering.build_graph(outputs)
    assert graph == {"mw": {"mr"}, "mr": set(), "pool": set()}
    assert layering.cycles(graph) == []
    assert layering.calls_up(graph, [["mw", "mr"], ["pool"]]) == []


def test_the_layers_table_is_read_top_first() -> None:
    doc = ("# X\n\n## Layers\n\nText.\n\n| layer | files |\n|---|---|\n"
           "| top | `tbv_main.c` |\n| transport | `tbv_tx.c`, `tbv_req.c` (and `not_a_file`) |\n"
           "| core | `proto/*.c` |\n\nAfter.\n\n## Next\n| layer | files |\n| x | `tbv_x.c` |\n")
    assert layering.parse_layers(doc, ["proto/tbv_rdma", "proto/tbv_frame"]) == [
        ["tbv_main"], ["tbv_tx", "tbv_req"], ["proto/tbv_frame", "proto/tbv_rdma"]]
    with pytest.raises(ValueError):
        layering.parse_layers("# X\n\n## Other\n", [])
