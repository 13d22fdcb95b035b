"""The house rules of the package (issue 15), checked on its source.

Floors: apps/ on top and imported by nothing below; no import cycle, lazy
imports included; the Krylov loop never imports an engine; no function over
120 lines; backend dispatch only in compute/; no measured figures in code
comments (they belong in docs/performance.md); CUDA only in source files.
"""
import ast
import pathlib
import re

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "bubbleflow"


def _modules():
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        package = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if package else parts)] = (path, package)
    return mods


MODULES = _modules()


def _imports(module, path, package):
    """Modules of the package that ``module`` imports (anywhere in it)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = module.split(".") if package else module.split(".")[:-1]
            if node.level:
                base = base[: len(base) - (node.level - 1)]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
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
