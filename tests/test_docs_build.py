"""The documentation builds with warnings as errors: every page reachable
from a toctree, every cross-reference resolved, every docstring of the API
reference readable by numpydoc, and every gallery script (examples/) run.

The build is ``python3 -m sphinx -W --keep-going -b html docs OUT`` in a
subprocess, as a contributor types it; the output goes to a temporary
folder (sphinx-gallery writes its generated pages into docs/auto_examples,
ignored by git).  Skipped, saying which, when Sphinx or one of the
extensions (the ``docs`` extra) is not installed.
"""
import importlib.util
import os
import pathlib
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: The modules the build imports: Sphinx, its extensions and the theme, and
#: what the gallery's scripts read results with.
NEEDED = ("sphinx", "myst_parser", "numpydoc", "sphinx_gallery", "pydata_sphinx_theme",
          "matplotlib", "xarray")
#: The build is given this long (it takes well under a minute on a 2-core CPU).
TIMEOUT_S = 300


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """``(process, seconds, html folder)`` of one build of the site."""
    missing = [name for name in NEEDED if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"the documentation needs {', '.join(missing)} "
                    "(pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("docs")
    env = dict(os.environ, MPLBACKEND="Agg")
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html",
         "-d", str(out / "doctrees"), str(DOCS), str(out / "html")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    return proc, time.perf_counter() - start, out / "html"


def test_docs_build_without_warnings(build):
    proc, seconds, _ = build
    problems = [line for line in (proc.stdout + proc.stderr).splitlines()
                if "WARNING" in line or "ERROR" in line]
    ok = proc.returncode == 0 and not problems
    assert ok, (
        f"sphinx-build failed (exit {proc.returncode}, {seconds:.0f} s):\n"
        + "\n".join(problems or (proc.stdout + proc.stderr).splitlines()[-40:]))


def test_reference_and_gallery_pages_are_built(build):
    proc, _, html = build
    if proc.returncode != 0:
        pytest.skip("the build failed (test_docs_build_without_warnings says why)")
    for page in ("index", "reference/index", "reference/case_keys", "reference/cli",
                 "reference/api", "auto_examples/index", "changelog", "performance"):
        assert (html / f"{page}.html").is_file(), page
    api = (html / "reference" / "api.html").read_text(encoding="utf-8")
    for name in ("bubbleflow.cg", "bubbleflow.dpcg", "bubbleflow.PressureSolver",
                 "bubbleflow.open_result", "load_case", "run_case"):
        assert name in api, f"{name} missing from the API reference"
    scripts = sorted(p.stem for p in (ROOT / "examples").glob("*.py"))
    assert scripts
    for stem in scripts:
        page = html / "auto_examples" / f"{stem}.html"
        assert page.is_file(), stem
        assert f"sphx_glr_{stem}_001.png" in page.read_text(encoding="utf-8"), (
            f"examples/{stem}.py drew no figure")


def test_every_public_name_is_in_the_api_reference():
    """Each name ``bubbleflow`` exports (``__all__``) is documented on the
    API page (an autodoc directive names it)."""
    import bubbleflow

    text = (DOCS / "reference" / "api.md").read_text(encoding="utf-8")
    missing = [name for name in bubbleflow.__all__ if name != "__version__"
               and f":: bubbleflow.{name}\n" not in text]
    assert not missing, f"docs/reference/api.md documents none of: {', '.join(missing)}"
