"""setup.py adds to pyproject.toml the build step that makes the package's binaries: it
builds bin/tfswap (go build, pure Go) and the TF2 plugin (grappler_bridge/build.sh plugin,
against an installed TensorFlow) into the wheel's tfswap/_bin/.

The plugin is compiled with TensorFlow's headers and flags, so the build needs a Python with
TensorFlow 2.18: $PYTHON, else the Python running pip when it has TensorFlow (seen outside
pip's isolated build environment), else the checkout's .venv/bin/python (make setup).
"""

import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))


def _outside_env():
    """The environment without what pip's isolated build environment sets (PYTHONPATH to a
    sitecustomize that hides the installed packages, PYTHONNOUSERSITE), for running the Python
    that has TensorFlow."""
    env = dict(os.environ)
    for k in ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME"):
        env.pop(k, None)
    return env


def _tensorflow_python():
    candidates = [os.environ.get("PYTHON"), sys.executable, os.path.join(ROOT, ".venv", "bin", "python")]
    for py in candidates:
        if not py or not os.path.exists(py):
            continue
        ok = subprocess.run([py, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('tensorflow') is None)"],
                            capture_output=True, env=_outside_env())
        if ok.returncode == 0:
            return py
    raise SystemExit("tfswap: building the plugin needs a Python with TensorFlow 2.18: set PYTHON, "
                     "use pip install --no-build-isolation, or run make setup first")


class BuildWithBinaries(build_py):
    """build_py that also builds tfswap and the plugin into tfswap/_bin."""

    def run(self):
        super().run()
        out = os.path.join(self.build_lib, "tfswap", "_bin")
        os.makedirs(out, exist_ok=True)
        go = shutil.which("go")
        if go is None:
            raise SystemExit("tfswap: building the package needs Go (go build ./cmd/tfswap)")
        env = dict(os.environ, CGO_ENABLED="0")
        subprocess.run([go, "build", "-o", os.path.join(out, "tfswap"), "./cmd/tfswap"], cwd=ROOT, env=env, check=True)
        env = dict(_outside_env(), PYTHON=_tensorflow_python())
        subprocess.run([os.path.join(ROOT, "grappler_bridge", "build.sh"), "plugin", "-o",
                        os.path.join(out, "libtfswap_plugin.so")], cwd=ROOT, env=env, check=True)


class BinaryDistribution(Distribution):
    """The wheel carries native binaries: it is platform-specific."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithBinaries}, distclass=BinaryDistribution)
