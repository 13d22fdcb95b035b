"""How the CuPy backend asks NVRTC to compile: its settings respect the user's."""
import os

from bubbleflow.compute.backend import use_precompiled_headers


def test_precompiled_headers_are_asked_for_unless_the_user_said_otherwise(monkeypatch):
    from bubbleflow.compute.backend import use_precompiled_headers

    monkeypatch.delenv("CUPY_NVRTC_USE_PCH", raising=False)
    assert use_precompiled_headers() is True
    assert os.environ["CUPY_NVRTC_USE_PCH"] == "1"
    monkeypatch.setenv("CUPY_NVRTC_USE_PCH", "0")
    assert use_precompiled_headers() is False
    assert os.environ["CUPY_NVRTC_USE_PCH"] == "0"
