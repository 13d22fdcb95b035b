"""The version users see: the installed distribution's, else the package's."""
from __future__ import annotations

__all__ = ["installed_version"]


def installed_version():
    """``importlib.metadata``'s version of ``bubbleflow``, else ``__version__``, else "unknown".

    An editable install from an older checkout can report another version than
    the source tree: the distribution's is what ``pip`` and bug reports show.
    """
    try:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("bubbleflow")
        except PackageNotFoundError:
            pass
    except ImportError:  # pragma: no cover - Python < 3.8
        pass
    try:
        from . import __version__

        return __version__
    except ImportError:
        return "unknown"
