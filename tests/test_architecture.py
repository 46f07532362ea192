"""Issue 23, item 1: the package's imports, read from its source with ``ast``, have no runtime
cycle and no module imports another module's private name; public signatures have no private
arguments."""

from __future__ import annotations

import ast
import functools
import inspect
from pathlib import Path

import delphi

ROOT = Path(delphi.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}


def _target(module: str, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` in ``module`` names."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if MODULES[module].name != "__init__.py":
        base = base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            lines |= {getattr(n, "lineno", -1) for n in ast.walk(node)}
    return lines


@functools.cache
def _parsed() -> dict[str, tuple[ast.Module, set[int]]]:
    """Every module's syntax tree and its type-only lines, parsed once per process when a test
    first asks (not at import: every pytest-xdist worker imports this file, one runs it)."""
    out = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        out[module] = tree, _type_checking_lines(tree)
    return out


@functools.cache
def _imports() -> tuple:
    """(importer, imported module, name or None, line) for every runtime import of a delphi
    module (type-only imports under ``if TYPE_CHECKING`` left out)."""
    out = []
    for module, (tree, skip) in _parsed().items():
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            if isinstance(node, ast.ImportFrom):
                target = _target(module, node)
                if target != "delphi" and not target.startswith("delphi."):
                    continue
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    if sub in MODULES:          # from . import submodule
                        out.append((module, sub, None, node.lineno))
                    else:
                        out.append((module, target, alias.name, node.lineno))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("delphi"):
                        out.append((module, alias.name, None, node.lineno))
    return tuple(out)


def test_the_walk_sees_the_package():
    assert len(MODULES) > 60 and len(_imports()) > 300
    assert ("delphi.forecasting.forecast", "delphi.forecasting.selection", "compare") in {
        i[:3] for i in _imports()}


def test_no_runtime_import_cycle():
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for importer, imported, _, _ in _imports():
        if imported in graph and imported != importer:
            graph[importer].add(imported)
    # A package's __init__ importing its own submodules is not a cycle of the layers: a
    # submodule importing its package means importing the package's __init__ first.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:       # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_no_module_imports_another_modules_private_name():
    private = sorted({f"{importer}:{line} imports {imported}.{name}"
                      for importer, imported, name, line in _imports()
                      if name and name.startswith("_") and not name.startswith("__")
                      and imported != importer})
    assert not private, "\n".join(private)


def test_public_functions_have_no_private_arguments():
    checked = 0
    for name in delphi.__all__:
        obj = getattr(delphi, name)
        if inspect.isfunction(obj):
            checked += 1
            hidden = [p for p in inspect.signature(obj).parameters if p.startswith("_")]
            assert not hidden, f"delphi.{name} has private arguments {hidden}"
    assert checked >= 10


#: The layers, lowest first (issue 23): a module imports only its own layer and those below.
#: Laws sit above inputs (the multi-power law computes on LR schedules); ``delphi/__init__``
#: and the ``data`` folder are outside the order.
LAYERS = ("errors", "core", "inputs", "laws", "fitting", "forecasting", "analyses", "registry",
          "presentation")


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def test_each_layer_imports_only_its_own_and_lower_layers():
    upward = sorted({f"{importer}:{line} ({LAYERS[_layer(importer)]}) imports {imported} "
                     f"({LAYERS[_layer(imported)]})"
                     for importer, imported, _, line in _imports()
                     if _layer(importer) is not None and _layer(imported) is not None
                     and _layer(imported) > _layer(importer)})
    assert not upward, "\n".join(upward)


def test_library_layers_import_delphi_modules_at_the_top_not_in_functions():
    # An import inside a function is for an optional or heavy dependency (matplotlib,
    # pyarrow, cryptography), not to dodge a cycle. Presentation keeps its lazy imports of the
    # library: the CLI is standard-library-only at import, so `delphi --help` stays fast.
    inside = []
    for module, (tree, skip) in _parsed().items():
        if module.startswith("delphi.presentation"):
            continue
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and node.lineno not in skip:
                    target = _target(module, node)
                    if target == "delphi" or target.startswith("delphi."):
                        inside.append(f"{module}:{node.lineno} ({fn.name}) imports {target}")
    assert not inside, "\n".join(sorted(set(inside)))
