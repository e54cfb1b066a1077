"""labkit's layers: the import graph of labkit/ has no cycle, and no module imports one of a higher layer than its own.

The layers are the table under "## Layers" in ARCHITECTURE.md, read here, so the rule written there is the rule
tested. The graph is every import in labkit/, those inside functions too (a lazy import is a dependency all the
same), built with ``ast``: nothing is imported. The few arrows that go up are listed below, each with its reason.
Imports sit at the top of their module but those of heavy libraries (and of labkit's modules that load one), or
those whose comment says why not.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from conftest import REPO

#: (importer, imported) -> why it may go up a layer. At most five (issue 24).
ALLOWED_UPWARD = {
    ("labkit.notebooks", "labkit"): "a notebook's first section runs the very Python API it shows the reader "
                                    "(labkit.sweep(...)), the package's own entry points",
}
MAX_UPWARD = 5

#: What may be imported inside the function that needs it, so that `labkit --help` and each command start fast:
#: the libraries that take tens of milliseconds to import (python -X importtime), and the modules of labkit that load
#: one as they are imported. Any other import, the standard library's too, sits at the top of its module, or says in
#: a comment beside it why it cannot.
HEAVY_LIBRARIES = (
    "pandas", "numpy", "pyarrow", "scipy", "arch", "statsmodels",  # tables and statistics
    "grpc", "grpc_tools", "grpc_health", "grpc_reflection", "google.protobuf", "h2",  # RPC; labkit.proto loads them
    "matplotlib", "seaborn", "paramiko", "cryptography", "dpkt", "rich", "tqdm", "duckdb",
    "papermill", "jupytext", "jupyter_client", "nbformat", "nbconvert", "ipykernel", "IPython",  # Jupyter
    "asyncio", "ssl", "importlib.metadata",  # the standard library's slow ones
)


# -- the graph ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Import:
    """One import statement of a module of the package, and what it imports."""

    module: str  # the importing module, dotted
    line: int
    targets: tuple[str, ...]  # modules of the package (dotted, resolved) or of outside it (as written)
    where: str  # "module" (it runs as the module is imported), "function" or "type-checking"
    commented: bool  # a comment on its line, or above it or the imports it is one of (why it stays in its function)


class Package:
    """The modules of the package at ``root`` (a directory with an ``__init__.py``), parsed, never imported."""

    def __init__(self, root: Path):
        self.root = root
        self.name = root.name
        self.files: dict[str, Path] = {}  # dotted name -> file; a package is its __init__
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root.parent).with_suffix("").parts
            self.files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
        self.sources = {name: path.read_text() for name, path in self.files.items()}
        self.trees = {name: ast.parse(source, str(self.files[name])) for name, source in self.sources.items()}
        self.exports = {name: lazy_exports(tree) for name, tree in self.trees.items()
                        if self.files[name].name == "__init__.py"}

    def resolve(self, dotted: str) -> str:
        """The module of the package that ``dotted`` (a module, or a name in one) is in."""
        while dotted not in self.files:
            dotted = dotted.rpartition(".")[0]
        return dotted

    def imports(self) -> Iterator[Import]:
        for name, tree in self.trees.items():
            lines = self.sources[name].splitlines()
            for exported in dict.fromkeys(self.exports.get(name, {}).values()):  # the facade's importlib, by name
                yield Import(name, 1, (f"{name}.{exported}",), "function", True)
            for node, where in _import_statements(tree.body):
                above = node.lineno - 2  # the line above it, or above the imports it is one of
                while above >= 0 and lines[above].strip().startswith(("import ", "from ")):
                    above -= 1
                commented = (above >= 0 and lines[above].strip().startswith("#")
                             or any("#" in line for line in lines[node.lineno - 1:node.end_lineno]))
                yield Import(name, node.lineno, tuple(self._targets(name, node)), where, commented)

    def _targets(self, name: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield self.resolve(alias.name) if alias.name.split(".")[0] == self.name else alias.name
            return
        base = node.module or ""
        if node.level:
            here = name if self.files[name].name == "__init__.py" else name.rpartition(".")[0]
            up = here.split(".")[: len(here.split(".")) - node.level + 1]
            base = ".".join(up + ([base] if base else []))
        if base.split(".")[0] != self.name:
            yield base
            return
        for alias in node.names:
            if f"{base}.{alias.name}" in self.files:  # a submodule
                yield f"{base}.{alias.name}"
            elif alias.name in self.exports.get(base, {}):  # a facade's name: its submodule
                yield f"{base}.{self.exports[base][alias.name]}"
            else:  # a name defined in the module
                yield self.resolve(base)

    def graph(self) -> dict[str, dict[str, int]]:
        """importer -> {imported: line of its first import}, over the package's own modules."""
        graph: dict[str, dict[str, int]] = defaultdict(dict)
        for found in self.imports():
            for target in found.targets:
                if target in self.files and target != found.module:
                    graph[found.module].setdefault(target, found.line)
        return graph

    def heavy(self) -> set[str]:
        """The modules whose import loads a heavy library: themselves, through a module they import as they load,
        or through a package they are in (importing labkit.a.b runs labkit/a/__init__.py)."""
        loads: dict[str, set[str]] = defaultdict(set)
        for found in self.imports():
            if found.where == "module":
                loads[found.module].update(found.targets)
        for name in self.files:
            loads[name].update(_parents(name))
            for target in list(loads[name]):
                if target in self.files:
                    loads[name].update(_parents(target))
        heavy = {name for name, targets in loads.items() if any(heavy_library(t) for t in targets)}
        while True:
            more = {name for name, targets in loads.items() if name not in heavy and targets & heavy}
            if not more:
                return heavy
            heavy |= more


def _import_statements(body: list[ast.stmt], where: str = "module") -> Iterator[tuple[ast.stmt, str]]:
    """Each import statement under ``body``, and where it is: "module" (it runs as the module is imported),
    "function", or "type-checking" (under ``if TYPE_CHECKING:``, for annotations only)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, where
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _import_statements(node.body, "function")
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _import_statements(node.body, "type-checking")
            yield from _import_statements(node.orelse, where)
        else:  # if, try, with, for, class: what their bodies import runs as the module loads
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    yield from _import_statements([child], where)
                elif isinstance(child, (ast.ExceptHandler, ast.match_case)):
                    yield from _import_statements(child.body, where)


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def heavy_library(name: str) -> bool:
    return any(name == heavy or name.startswith(f"{heavy}.") for heavy in HEAVY_LIBRARIES)


def lazy_exports(tree: ast.Module) -> dict[str, str]:
    """A package facade's ``_EXPORTS`` (name -> submodule it imports on first use, labkit.analysis and
    labkit.parsers): ``from labkit.analysis import window_stats`` is an import of labkit.analysis.windows."""
    for node in tree.body:
        if (isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict)
                and any(isinstance(t, ast.Name) and t.id == "_EXPORTS"
                        for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))):
            return {key.value: value.value for key, value in zip(node.value.keys, node.value.values)}
    return {}


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


def describe(arrow: tuple[str, str, int], layers, package: Package) -> str:
    src, dst, line = arrow
    return (f"{package.files[src].relative_to(package.root.parent)}:{line}: {src} ({layers[part_of(src)][1]}) imports "
            f"{dst} ({layers[part_of(dst)][1]})")


LABKIT = Package(REPO / "labkit")
LAYERS = written_layers((REPO / "ARCHITECTURE.md").read_text())


def test_every_part_of_labkit_has_its_layer_in_architecture_md():
    parts = {part_of(module) for module in LABKIT.files}
    assert sorted(parts - set(LAYERS)) == [], "parts of labkit/ missing from ARCHITECTURE.md's Layers"
    assert sorted(set(LAYERS) - parts) == [], "ARCHITECTURE.md's Layers names what labkit/ does not have"
    assert len({number for number, _ in LAYERS.values()}) >= 8


def describe_cycle(graph: dict[str, dict[str, int]], component: set[str]) -> str:
    return (f"{len(component)} modules import each other round ({', '.join(sorted(component))}), "
            f"e.g. {' -> '.join(shortest_loop(graph, component))}")


def test_labkit_has_no_import_cycle():
    graph = LABKIT.graph()
    found = [describe_cycle(graph, component) for component in cycles(graph)]
    assert found == [], "import cycles:\n" + "\n".join(found)


def test_no_module_imports_from_a_higher_layer_but_the_listed_few():
    arrows = upward_arrows(LABKIT.graph(), LAYERS)
    unlisted = [describe(a, LAYERS, LABKIT) for a in arrows if (a[0], a[1]) not in ALLOWED_UPWARD]
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
    graph = Package(package).graph()
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


def hidden_imports(package: Package) -> list[str]:
    """Where an import sits inside a function though what it imports is light, with no comment saying why."""
    heavy = package.heavy()
    return [f"{package.files[i.module].relative_to(package.root.parent)}:{i.line}: "
            f"{', '.join(dict.fromkeys(i.targets))}"
            for i in package.imports() if i.where == "function" and not i.commented
            and not all(t in heavy if t in package.files else heavy_library(t) for t in i.targets)]


def test_imports_sit_at_the_top_of_their_module_but_heavy_ones():
    """A lazy import hides a dependency from readers and from this file's graph; only a heavy library (or a module
    of labkit that loads one) waits for the function that needs it, or one whose comment says why it must."""
    found = hidden_imports(LABKIT)
    assert found == [], "imports inside functions that belong at the top of their module:\n" + "\n".join(found)


def test_heavy_is_what_loads_a_heavy_library_as_it_is_imported(tmp_path):
    package = tmp_path / "kit"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "frames.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pandas\n"
                                        "try:\n    import pyarrow\nexcept ImportError:\n    pyarrow = None\n")
    (package / "plots.py").write_text("from kit import frames\n\n\ndef draw():\n    import matplotlib\n")
    (package / "units.py").write_text("import re\n")
    (package / "cli.py").write_text("def main():\n    import json\n    from kit import plots\n"
                                     "    from kit import units\n    import pandas\n"
                                     "    # the units parse only what a flag gives\n    from kit.units import re\n"
                                     "    import os\n")
    kit = Package(package)
    assert kit.heavy() == {"kit.frames", "kit.plots"}  # pyarrow at import time; pandas only for annotations
    assert hidden_imports(kit) == ["kit/cli.py:2: json", "kit/cli.py:4: kit.units"]
