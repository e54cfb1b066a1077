"""labkit's layers: the import graph of labkit/ has no cycle, and no module imports one of a higher layer than its own.

The layers are the table under "## Layers" in ARCHITECTURE.md, read here, so the rule written there is the rule
tested. The graph is every import in labkit/, those inside functions too (a lazy import is a dependency all the
same), built with ``ast``: nothing is imported. The few arrows that go up are listed below, each with its reason.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from conftest import REPO

#: (importer, imported) -> why it may go up a layer. At most five (issue 24).
ALLOWED_UPWARD = {
    ("labkit.notebooks", "labkit"): "a notebook's first section runs the very Python API it shows the reader "
                                    "(labkit.sweep(...)), the package's own entry points",
}
MAX_UPWARD = 5


# -- the graph ---------------------------------------------------------------------------------------------------------


def modules_of(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package at ``root`` (a package is its ``__init__``)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def lazy_exports(tree: ast.Module) -> dict[str, str]:
    """A package facade's ``_EXPORTS`` (name -> submodule it imports on first use, labkit.analysis and
    labkit.parsers): ``from labkit.analysis import window_stats`` is an import of labkit.analysis.windows."""
    for node in tree.body:
        if (isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict)
                and any(isinstance(t, ast.Name) and t.id == "_EXPORTS"
                        for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))):
            return {key.value: value.value for key, value in zip(node.value.keys, node.value.values)}
    return {}


def import_graph(root: Path) -> dict[str, dict[str, int]]:
    """importer -> {imported: line of its first import} over the package at ``root``, its own modules only."""
    mods = modules_of(root)
    package = root.name
    trees = {name: ast.parse(path.read_text(), str(path)) for name, path in mods.items()}
    exports = {name: lazy_exports(tree) for name, tree in trees.items() if mods[name].name == "__init__.py"}

    def resolve(dotted: str) -> str:
        while dotted not in mods:
            dotted = dotted.rpartition(".")[0]
        return dotted

    graph: dict[str, dict[str, int]] = defaultdict(dict)
    for name, tree in trees.items():
        def arrow(target: str, line: int) -> None:
            if target != name:
                graph[name].setdefault(target, line)

        for exported in exports.get(name, {}).values():  # the facade imports them by name, with importlib
            arrow(f"{name}.{exported}", 1)
        here = name if mods[name].name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == package:
                        arrow(resolve(alias.name), node.lineno)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                if base.split(".")[0] != package:
                    continue
                for alias in node.names:
                    if f"{base}.{alias.name}" in mods:  # a submodule
                        arrow(f"{base}.{alias.name}", node.lineno)
                    elif alias.name in exports.get(base, {}):
                        arrow(f"{base}.{exports[base][alias.name]}", node.lineno)
                    else:  # a name defined in the module
                        arrow(resolve(base), node.lineno)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[set[str]]:
    """The modules that import each other round a cycle: each strongly connected component of two or more (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return components


def shortest_loop(graph: dict[str, dict[str, int]], component: set[str]) -> list[str]:
    """The shortest path from the component's first module back to itself, within the component (breadth first)."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph.get(v, {})):
                if w == start:
                    return paths[v] + [start]
                if w in component and w not in paths:
                    paths[w] = paths[v] + [w]
                    following.append(w)
        frontier = following
    return sorted(component)


# -- the layers --------------------------------------------------------------------------------------------------------


def written_layers(text: str) -> dict[str, tuple[int, str]]:
    """Part of labkit -> (layer number, layer name), from the table under "## Layers" of ARCHITECTURE.md: lines
    ``    N name   part part ...``, each part a module or package directly under labkit/ (``__init__`` is the
    package's own ``labkit/__init__.py``)."""
    section = text.split("\n## Layers", 1)[1].split("\n## ", 1)[0]
    layers = {}
    for number, name, parts in re.findall(r"^    (\d+) +(\S+) +(.+)$", section, flags=re.MULTILINE):
        for part in parts.split():
            assert part not in layers, f"{part} is in two layers of ARCHITECTURE.md"
            layers[part] = (int(number), name)
    return layers


def part_of(module: str) -> str:
    """The part of labkit a module belongs to: labkit.hosts.ssh -> hosts, labkit.store -> store, labkit -> __init__."""
    return module.split(".")[1] if "." in module else "__init__"


def upward_arrows(graph: dict[str, dict[str, int]], layers: dict[str, tuple[int, str]]) -> list[tuple[str, str, int]]:
    """(importer, imported, line) for each import of a module in a higher layer than the importer's."""
    return sorted((src, dst, line) for src, targets in graph.items() for dst, line in targets.items()
                  if layers[part_of(src)][0] < layers[part_of(dst)][0])


def describe(arrow: tuple[str, str, int], layers, mods) -> str:
    src, dst, line = arrow
    return (f"{mods[src].relative_to(REPO)}:{line}: {src} ({layers[part_of(src)][1]}) imports "
            f"{dst} ({layers[part_of(dst)][1]})")


LABKIT = REPO / "labkit"
LAYERS = written_layers((REPO / "ARCHITECTURE.md").read_text())


def test_every_part_of_labkit_has_its_layer_in_architecture_md():
    parts = {part_of(module) for module in modules_of(LABKIT)}
    assert sorted(parts - set(LAYERS)) == [], "parts of labkit/ missing from ARCHITECTURE.md's Layers"
    assert sorted(set(LAYERS) - parts) == [], "ARCHITECTURE.md's Layers names what labkit/ does not have"
    assert len({number for number, _ in LAYERS.values()}) >= 8


def describe_cycle(graph: dict[str, dict[str, int]], component: set[str]) -> str:
    return (f"{len(component)} modules import each other round ({', '.join(sorted(component))}), "
            f"e.g. {' -> '.join(shortest_loop(graph, component))}")


def test_labkit_has_no_import_cycle():
    graph = import_graph(LABKIT)
    found = [describe_cycle(graph, component) for component in cycles(graph)]
    assert found == [], "import cycles:\n" + "\n".join(found)


def test_no_module_imports_from_a_higher_layer_but_the_listed_few():
    mods = modules_of(LABKIT)
    arrows = upward_arrows(import_graph(LABKIT), LAYERS)
    unlisted = [describe(a, LAYERS, mods) for a in arrows if (a[0], a[1]) not in ALLOWED_UPWARD]
    assert unlisted == [], "imports from a higher layer (ARCHITECTURE.md, Layers):\n" + "\n".join(unlisted)
    # The list stays short and true: each allowed arrow still exists (a removed one is taken off the list).
    assert len(ALLOWED_UPWARD) <= MAX_UPWARD
    assert sorted(ALLOWED_UPWARD) == sorted({(src, dst) for src, dst, _ in arrows})


def test_a_cycle_and_an_upward_import_are_named_where_they_are(tmp_path):
    """The checks on a package of three modules: a store that reads its summary from the report (inside a function,
    relatively), a report that reads runs from the store, and an analysis facade that imports lazily by name."""
    package = tmp_path / "kit"
    (package / "analysis").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "store.py").write_text("import json\n\n\ndef summary():\n    from .report import make_report\n")
    (package / "report.py").write_text("from kit.store import summary\nfrom kit.analysis import trim\n")
    (package / "analysis" / "__init__.py").write_text('_EXPORTS = {"trim": "trimming"}\n')
    (package / "analysis" / "trimming.py").write_text("import kit\n")
    graph = import_graph(package)
    assert graph == {"kit.store": {"kit.report": 5},
                     "kit.report": {"kit.store": 1, "kit.analysis.trimming": 2},
                     "kit.analysis": {"kit.analysis.trimming": 1},
                     "kit.analysis.trimming": {"kit": 1}}
    assert cycles(graph) == [{"kit.report", "kit.store"}]
    assert describe_cycle(graph, {"kit.report", "kit.store"}) == (
        "2 modules import each other round (kit.report, kit.store), e.g. kit.report -> kit.store -> kit.report")
    layers = written_layers("# kit\n\n## Layers\n\n    1 analysis  analysis\n    2 store     store\n"
                            "    3 results   report\n    4 api       __init__\n\n## Elsewhere\n")
    assert upward_arrows(graph, layers) == [("kit.analysis.trimming", "kit", 1), ("kit.store", "kit.report", 5)]
