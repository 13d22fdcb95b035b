"""Sphinx configuration of bubbleflow's documentation.

Build (warnings are errors, as in ``tests/test_docs_build.py``)::

    python3 -m sphinx -W --keep-going -b html docs docs/_build/html

Pages are Markdown (MyST); the API reference comes from the docstrings
(numpydoc); the gallery's scripts (``examples/``) run at every build on
NumPy and their figures go into ``auto_examples/`` (generated, ignored by
git).  Nothing is fetched from the network: no intersphinx inventories.
"""
import os
import sys

import matplotlib

matplotlib.use("Agg")       # the gallery's figures, without a display

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# The checkout's package first, should another copy be installed.
sys.path.insert(0, ROOT)

import bubbleflow  # noqa: E402

# -- Project ------------------------------------------------------------------

project = "bubbleflow"
author = "the bubbleflow authors"
copyright = "the bubbleflow authors, MIT licence"
version = release = bubbleflow.__version__

# -- General ------------------------------------------------------------------

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = [
    "_build",
    "Thumbs.db",
    ".DS_Store",
    # sphinx-gallery's by-products beside the pages it generates
    "auto_examples/*.ipynb",
    "auto_examples/*.py",
    "auto_examples/*.zip",
    "auto_examples/*.md5",
    "auto_examples/*.json",
]
# Quotes as typed: the reference pages quote values and paths ('/' or '\'),
# which typographic quotes (and their backslash escapes) would change.
smartquotes = False
templates_path = ["_templates"] if os.path.isdir(os.path.join(HERE, "_templates")) else []

# -- MyST ---------------------------------------------------------------------

myst_heading_anchors = 3            # [text](page.md#a-heading) links
myst_enable_extensions = ["dollarmath", "colon_fence"]

# -- autodoc and numpydoc -----------------------------------------------------

autodoc_member_order = "bysource"
autodoc_typehints = "none"          # the numpydoc sections say the types
numpydoc_show_class_members = False  # members are listed with :members: where wanted
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# -- sphinx-gallery -----------------------------------------------------------

sphinx_gallery_conf = {
    "examples_dirs": os.path.join(ROOT, "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r".*\.py$",         # run every script, not only plot_*
    "ignore_pattern": r"__init__\.py",
    "within_subsection_order": "FileNameSortKey",   # plot_pressure_, plot_rising_, plot_xarray_
    "abort_on_example_error": True,
    "download_all_examples": False,
    "remove_config_comments": True,
    "plot_gallery": "True",
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    "reset_modules": ("matplotlib",),
    "show_memory": False,
    "min_reported_time": 1,
}

# -- HTML ---------------------------------------------------------------------

html_theme = "pydata_sphinx_theme"
html_title = f"bubbleflow {release}"
html_static_path = ["_static"] if os.path.isdir(os.path.join(HERE, "_static")) else []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_show_sourcelink = False
