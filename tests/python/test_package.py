"""Tests of the pip-installable package: `pip install` from the checkout builds a wheel that
carries the tfswap binary and the TF2 plugin, and the installed package finds both.

The install goes into a temporary --target directory with the checkout's virtual environment
(which has TensorFlow, setuptools and wheel): --no-build-isolation and --no-deps, so nothing
is downloaded.

Run:  .venv/bin/python -m pytest -q tests/python/test_package.py
"""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain")
    target = tmp_path_factory.mktemp("site")
    # Build from a copy of the sources pip needs, so that the checkout gets no build/ or
    # egg-info directories from the test.
    src = tmp_path_factory.mktemp("src")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in files.decode().split("\0"):
        if not name or name.split("/")[0] in ("testmodels", "docs", "bench", "tests", ".ci"):
            continue
        if not (ROOT / name).is_file():
            continue  # deleted in the working tree
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, src / name)
    env = dict(os.environ, PYTHON=sys.executable)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-q",
         "--no-build-isolation", "--no-deps", "--target", str(target), str(src)],
        capture_output=True, text=True, env=env, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return target


def test_wheel_carries_binary_and_plugin(installed):
    bindir = installed / "tfswap" / "_bin"
    assert os.access(bindir / "tfswap", os.X_OK)
    assert (bindir / "libtfswap_plugin.so").stat().st_size > 0
    out = subprocess.run([str(bindir / "tfswap"), "rewrite", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--budget" in out.stdout + out.stderr
    syms = subprocess.run(["nm", "-D", "--defined-only", str(bindir / "libtfswap_plugin.so")],
                          capture_output=True, text=True)
    if syms.returncode == 0:
        assert " TF_InitGraph" in syms.stdout


def test_installed_package_finds_its_files(installed):
    code = (
        "import tfswap, os; print(tfswap.binary_path()); print(tfswap.plugin_path())"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TFSWAP_BINARY", "TFSWAP_PLUGIN")}
    env["PYTHONPATH"] = str(installed)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=installed, check=True)
    binary, plugin = out.stdout.split()
    assert binary == str(installed / "tfswap" / "_bin" / "tfswap")
    assert plugin == str(installed / "tfswap" / "_bin" / "libtfswap_plugin.so")


def test_rewrite_for_tf1(installed):
    """tfswap.rewrite() on a fixture: the rewritten GraphDef holds swap nodes."""
    code = r"""
import sys, tfswap
from tensorflow.core.framework import graph_pb2
g = graph_pb2.GraphDef()
g.ParseFromString(open(sys.argv[1], "rb").read())
out = tfswap.rewrite(g, strategy="lms-fixed", min_bytes=0)
print(sum(1 for n in out.node if n.name.startswith("tfswap/")))
try:
    tfswap.rewrite(g, strategy="no-such-strategy")
except RuntimeError as e:
    print("ERROR", e)
"""
    env = dict(os.environ, PYTHONPATH=str(installed), TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TFSWAP_BINARY", None)
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "testmodels" / "fixtures" / "resnet.pb")],
                         capture_output=True, text=True, env=env, cwd=installed, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert int(lines[0]) > 10
    assert lines[1].startswith("ERROR tfswap rewrite failed (exit status 2)") and "strategy" in lines[1]


def test_profile_for_gpu_names():
    """enable() plans for the built-in profile that names the GPU TensorFlow sees."""
    sys.path.insert(0, str(ROOT / "python"))
    import tfswap

    cases = {
        "Tesla V100-SXM2-16GB": "v100-16gb",
        "Tesla V100-PCIE-32GB": "v100-32gb",
        "NVIDIA A100-SXM4-80GB": "a100-80gb",
        "NVIDIA A100-SXM4-40GB": "a100-40gb",
        "NVIDIA H100 80GB HBM3": "h100",
        "NVIDIA GH200 480GB": "gh200",
        "NVIDIA GeForce GTX 1080 Ti": "gtx1080ti",
        "GeForce GTX TITAN X": "titanx",
        "NVIDIA GeForce RTX 3090": None,
        "": None,
    }
    for name, want in cases.items():
        assert tfswap.profile_for(name) == want, name
