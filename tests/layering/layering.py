"""Which file of the module calls which, read from the built objects with `nm`.

A file calls another when its object leaves a symbol undefined (`U`) that the other's object
defines as a global (`T`, `D`, `B`, `R`). A call through a function pointer leaves no such
symbol, so it makes no edge: that is the one way a lower file may reach a higher one, and
docs/architecture.md lists each such pointer.

    python3 tests/layering/layering.py [KERNEL_DIR]    # the graph, its cycles, calls against the layers

The layers are the table under "## Layers" in docs/architecture.md: one row per layer, top
first, naming its files in backticks (`tbv_x.c`; `proto/*.c` for all of kernel/proto/).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KERNEL = REPO / "kernel"
ARCHITECTURE = REPO / "docs" / "architecture.md"

# A file's object as nm names it: kernel/tbv_rail.o is "tbv_rail", kernel/proto/tbv_rdma.o "proto/tbv_rdma".
Graph = dict[str, set[str]]


def parse_nm(text: str) -> tuple[set[str], set[str]]:
    """The global symbols an object defines, and those it leaves undefined."""
    defined: set[str] = set()
    undefined: set[str] = set()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == "U":
            undefined.add(fields[1])
        elif len(fields) == 3 and fields[1] in "TDBR":
            defined.add(fields[2])
    return defined, undefined


def build_graph(nm_outputs: Mapping[str, str]) -> Graph:
    """File -> the files it calls, from each file's `nm` output; symbols of no file here are ignored."""
    symbols = {name: parse_nm(text) for name, text in nm_outputs.items()}
    owner: dict[str, str] = {}
    for name, (defined, _) in symbols.items():
        for sym in defined:
            owner[sym] = name
    graph: Graph = {name: set() for name in symbols}
    for name, (_, undefined) in symbols.items():
        graph[name] = {owner[sym] for sym in undefined if sym in owner and owner[sym] != name}
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The groups of files that reach each other (strongly connected, more than one file), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for callee in sorted(graph.get(node, ())):
            if callee not in index:
                visit(callee)
                low[node] = min(low[node], low[callee])
            elif callee in on_stack:
                low[node] = min(low[node], index[callee])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def calls_up(graph: Graph, layers: list[list[str]]) -> list[str]:
    """Each call from a file to one in a higher layer, as "caller -> callee"."""
    level = {name: i for i, layer in enumerate(layers) for name in layer}
    return sorted(f"{caller} -> {callee}"
                  for caller, callees in graph.items() for callee in callees
                  if caller in level and callee in level and level[callee] < level[caller])


def parse_layers(markdown: str, proto_files: Iterable[str] = ()) -> list[list[str]]:
    """The layers of the table under "## Layers", top first, as object names ("tbv_rail", "proto/...")."""
    section = markdown.split("\n## Layers\n", 1)
    if len(section) < 2:
        raise ValueError('no "## Layers" section')
    layers: list[list[str]] = []
    in_table = False
    for line in section[1].splitlines():
        if line.startswith("## "):
            break
        if line.startswith("| layer |"):
            in_table = True
            continue
        if not in_table:
            continue
        if not line.startswith("|"):
            break
        if set(line) <= set("|-: "):
            continue
        names: list[str] = []
        for ref in re.findall(r"`([^`]+\.c)`", line.split("|")[2]):
            names.extend(sorted(proto_files) if ref == "proto/*.c" else [ref[:-2]])
        layers.append(names)
    if not layers:
        raise ValueError('no "| layer | files |" table under "## Layers"')
    return layers


def kbuild_objects(kernel: Path = KERNEL) -> list[str]:
    """The objects of thunderbolt_ibverbs.ko in every build: kernel/Kbuild's first list."""
    block = re.search(r"thunderbolt_ibverbs-y :=((?:.*\\\n)*.*)", (kernel / "Kbuild").read_text())
    if not block:
        raise ValueError("kernel/Kbuild: no thunderbolt_ibverbs-y list")
    return [o[:-2] for o in block.group(1).replace("\\", " ").split()]


def nm_outputs(objects: Mapping[str, Path]) -> dict[str, str]:
    return {name: subprocess.run(["nm", str(path)], check=True, capture_output=True,
                                 text=True).stdout for name, path in objects.items()}


def main(argv: list[str]) -> int:
    kernel = Path(argv[1]) if len(argv) > 1 else KERNEL
    objects = {name: kernel / f"{name}.o" for name in kbuild_objects(kernel)}
    graph = build_graph(nm_outputs(objects))
    for name in sorted(graph):
        print(f"{name} -> {', '.join(sorted(graph[name])) or '(nothing of ours)'}")
    proto = [n for n in objects if n.startswith("proto/")]
    up = calls_up(graph, parse_layers(ARCHITECTURE.read_text(), proto))
    print("cycles:", cycles(graph) or "none")
    print("calls up the layers of docs/architecture.md:", up or "none")
    return 1 if cycles(graph) or up else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
