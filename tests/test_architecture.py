"""The house rules of the package, checked on its source.

Floors: apps/ on top and imported by nothing below; no import cycle, lazy
imports included; the Krylov loop never imports an engine; no function over
120 lines; backend dispatch only in compute/; no measured figures in code
comments (they belong in docs/performance_records.md); CUDA only in source files; no
private name imported from another module; code and test names say why, not
when (no issue or session numbers); no source file over 800 lines; no module
of the flow or the linear algebra in a dimension's or the ranks' variant of
itself (``x_nd``, ``x_ranks``: an algorithm is written once, n-D, and one
process is the one-rank case).
"""
import ast
import pathlib
import re

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "bubbleflow"
TESTS = pathlib.Path(__file__).resolve().parent
#: Words that date code instead of explaining it: an issue or session number,
#: or "the seed's" for a method that has a name and a citable source.
HISTORY = r"(?i)\b(issue\s+#?\d+|session\s+\d+|the seed'?s\b)"


def _modules():
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        package = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if package else parts)] = (path, package)
    return mods


MODULES = _modules()


def _from_module(module, package, node):
    """The absolute name of the module a ``from ... import`` in ``module`` reads."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module, path, package):
    """Modules of the package that ``module`` imports (anywhere in it)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = _from_module(module, package, node)
            names = [base + "." + a.name if base + "." + a.name in MODULES else base
                     for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            while name not in MODULES and "." in name:
                name = name.rsplit(".", 1)[0]
            if name in MODULES and not (package and name.startswith(module + ".")):
                out.add(name)                    # (a package re-exporting its own modules is not a cycle)
    return out


GRAPH = {m: _imports(m, p, pkg) for m, (p, pkg) in MODULES.items()}


def test_no_import_cycle():
    def reach(start):
        seen, todo = set(), [start]
        while todo:
            for nxt in GRAPH[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen
    cycles = sorted(m for m in GRAPH if m in reach(m))
    assert not cycles


def test_apps_on_top_and_loop_without_engines():
    below = {(m, t) for m, ts in GRAPH.items() for t in ts
             if t.startswith("bubbleflow.apps") and not m.startswith("bubbleflow.apps")
             and m != "bubbleflow.__main__"}
    assert not below
    loop = {(m, t) for m, ts in GRAPH.items() if m.startswith("bubbleflow.linalg.krylov")
            for t in ts if t.startswith(("bubbleflow.linalg.fused", "bubbleflow.linalg.engines"))}
    assert not loop


def test_no_long_functions():
    long = [(str(p), n.name, n.end_lineno - n.lineno + 1) for p, _ in MODULES.values()
            for n in ast.walk(ast.parse(p.read_text()))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.end_lineno - n.lineno + 1 > 120]
    assert not long


@pytest.mark.parametrize("rule,pattern,where", [
    ("backend dispatch", r"name\s*[!=]=\s*['\"](cupy|numpy)['\"]|xp is (not )?np\b"
                         r"|__module__\.startswith\(['\"]cupy", "not compute"),
    ("measured figure in a comment", r"(#|//).*(\d\s?(ms|us|GB/s|GiB/s)\b|H100|H200|A100)", "all"),
    ("inline CUDA", r"extern \"C\"|__global__", "python"),
    ("history words (code says why, not when)", HISTORY, "all"),
])
def test_source_rules(rule, pattern, where):
    files = [p for p, _ in MODULES.values()]
    if where == "not compute":
        files = [p for p in files if "compute" not in p.relative_to(PACKAGE).parts]
    if where == "all":
        files += list(PACKAGE.rglob("*.cu")) + list(PACKAGE.rglob("*.cuh"))
    hits = [f"{p.relative_to(PACKAGE)}:{i}" for p in files
            for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(pattern, line)]
    assert not hits, f"{rule}: {hits}"


def _private(name):
    return name.startswith("_") and not name.startswith("__")


def test_no_private_name_imported_across_modules():
    """A name another module needs is public in its one home: no ``from m
    import _name`` and no ``m._name`` on an imported module of the package."""
    hits = []
    for module, (path, package) in MODULES.items():
        tree = ast.parse(path.read_text())
        modules_bound = {}                  # local name -> package module it names
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _from_module(module, package, node)
                if source not in MODULES:
                    continue
                for a in node.names:
                    if source + "." + a.name in MODULES:
                        modules_bound[a.asname or a.name] = source + "." + a.name
                    elif _private(a.name) and source != module:
                        hits.append(f"{module}:{node.lineno} imports {source}.{a.name}")
            elif isinstance(node, ast.Import):
                modules_bound.update({a.asname: a.name for a in node.names
                                      if a.asname and a.name in MODULES})
        hits += [f"{module}:{node.lineno} uses {modules_bound[node.value.id]}.{node.attr}"
                 for node in ast.walk(tree)
                 if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                 and node.value.id in modules_bound and _private(node.attr)]
    assert not hits, f"private names across modules: {hits}"


def test_test_names_and_docstrings_without_history_words():
    """Tests are named for what they check, not for the issue or session
    that added them."""
    hits = []
    for path in TESTS.rglob("*.py"):
        tree = ast.parse(path.read_text())
        nodes = [tree] + [n for n in ast.walk(tree)
                          if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        for node in nodes:
            name = getattr(node, "name", "")
            texts = [name.replace("_", " ")] if name.startswith(("test", "Test")) else []
            if not name or name.startswith(("test", "Test")):
                texts.append(ast.get_docstring(node) or "")
            hits += [f"{path.relative_to(TESTS)}:{name or 'module'}"
                     for text in texts if re.search(HISTORY, text)]
    assert not hits, f"history words in tests: {hits}"


def test_no_long_files():
    long = [(str(p.relative_to(PACKAGE)), n) for p, _ in MODULES.values()
            if (n := len(p.read_text().splitlines())) > 800]
    assert not long


def test_no_dimension_or_rank_variants_of_a_module():
    variants = [m for m in MODULES if m.startswith(("bubbleflow.flow", "bubbleflow.linalg"))
                and re.search(r"_(nd|2d|3d|ranks)$", m)]
    assert not variants
