"""The GPU branch of scripts/setup.sh, as far as it goes without a GPU and without
downloading the GPU wheel: which requirements file setup picks (a fake nvidia-smi on PATH, a
fake /proc/driver/nvidia, GPU=1/0, `make setup GPU=1`), that requirements-gpu.txt pins the
same release as requirements.txt, and pip's resolution of the pinned GPU requirement (a dry
run that reads the wheel's metadata only; skipped when PyPI cannot be reached).

Run:  .venv/bin/python -m pytest -q tests/python/test_setup_gpu.py
"""

import json
import os
import pathlib
import re
import socket
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SETUP = ROOT / "scripts" / "setup.sh"


def _fake_bin(tmp_path, nvidia_smi):
    """A directory holding an nvidia-smi script (None: one that fails, as when the driver is
    not loaded), put first on PATH so that a real nvidia-smi is never consulted."""
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    script = d / "nvidia-smi"
    if nvidia_smi is None:
        body = "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.' >&2\nexit 9\n"
    else:
        body = "#!/bin/sh\n[ \"$1\" = -L ] || exit 2\ncat <<'EOF'\n%s\nEOF\n" % nvidia_smi
    script.write_text(body)
    script.chmod(0o755)
    return d


def _select(tmp_path, nvidia_smi=None, proc_gpus=(), gpu=None):
    env = dict(os.environ)
    env["PATH"] = str(_fake_bin(tmp_path, nvidia_smi)) + os.pathsep + env["PATH"]
    proc = tmp_path / "proc_nvidia"
    (proc / "gpus").mkdir(parents=True, exist_ok=True)
    for bus in proc_gpus:
        (proc / "gpus" / bus).mkdir()
        (proc / "gpus" / bus / "information").write_text("Model: Tesla V100-SXM2-16GB\n")
    env["TFSWAP_NVIDIA_PROC"] = str(proc)
    env.pop("GPU", None)
    if gpu is not None:
        env["GPU"] = gpu
    return subprocess.run(["bash", str(SETUP), "--print-requirements"], capture_output=True, text=True, env=env, timeout=60)


V100 = "GPU 0: Tesla V100-SXM2-16GB (UUID: GPU-5a8c4e5e-0000-0000-0000-000000000000)"


@pytest.mark.parametrize("case", [
    dict(nvidia_smi=None, want="requirements.txt (no NVIDIA GPU found)"),
    dict(nvidia_smi="", want="requirements.txt (no NVIDIA GPU found)"),
    dict(nvidia_smi=V100, want="requirements-gpu.txt (nvidia-smi lists 1 NVIDIA GPU(s))"),
    dict(nvidia_smi=V100 + "\n" + V100.replace("GPU 0", "GPU 1"), want="requirements-gpu.txt (nvidia-smi lists 2 NVIDIA GPU(s))"),
    dict(nvidia_smi=None, proc_gpus=["0000:00:04.0"], want="requirements-gpu.txt (the NVIDIA driver lists GPUs in"),
    dict(nvidia_smi=None, gpu="1", want="requirements-gpu.txt (GPU=1)"),
    dict(nvidia_smi=V100, gpu="0", want="requirements.txt (GPU=0)"),
])
def test_setup_selects_the_runtime(tmp_path, case):
    want = case.pop("want")
    p = _select(tmp_path, **case)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(want), (case, p.stdout)


def test_setup_rejects_a_bad_gpu_value(tmp_path):
    p = _select(tmp_path, gpu="yes")
    assert p.returncode == 2 and "GPU must be 1" in p.stderr, (p.stdout, p.stderr)


def test_make_setup_passes_gpu():
    p = subprocess.run(["make", "-n", "setup", "GPU=1"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and 'GPU="1" ./scripts/setup.sh' in p.stdout, p.stdout + p.stderr


def _requirements(name):
    lines = [l.strip() for l in (ROOT / name).read_text().splitlines()]
    return [l for l in lines if l and not l.startswith("#")]


def test_gpu_requirements_pin_the_cpu_release():
    cpu, gpu = _requirements("requirements.txt"), _requirements("requirements-gpu.txt")
    tf_cpu = [l for l in cpu if l.startswith("tensorflow")]
    tf_gpu = [l for l in gpu if l.startswith("tensorflow")]
    assert len(tf_cpu) == 1 and re.fullmatch(r"tensorflow-cpu==[\d.]+", tf_cpu[0]), tf_cpu
    version = tf_cpu[0].split("==")[1]
    assert tf_gpu == ["tensorflow[and-cuda]==" + version], tf_gpu
    # Everything else is the same.
    assert [l for l in cpu if not l.startswith("tensorflow")] == [l for l in gpu if not l.startswith("tensorflow")]


def _pypi_reachable():
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
        return True
    except OSError:
        return False


def test_gpu_requirement_resolves(tmp_path):
    """pip's dry run of the pinned GPU requirement, without its dependencies: it reads the
    wheel's metadata (not the ~600 MB wheel) and names the wheel it would install. The wheel
    is CPython's for this interpreter, and its and-cuda extra pins the pip packages whose
    libraries setup expects (scripts/setup.sh --gpu-libs)."""
    if not _pypi_reachable():
        pytest.skip("PyPI (pypi.org:443) cannot be reached: the resolver's dry run needs the network")
    report = tmp_path / "report.json"
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--dry-run", "--no-deps",
                        "--ignore-installed", "--quiet", "--report", str(report), "-r", str(ROOT / "requirements-gpu.txt")],
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0 and re.search(r"NewConnectionError|Temporary failure in name resolution|Network is unreachable|ProxyError", p.stderr):
        pytest.skip("pip could not reach its index: " + p.stderr.strip().splitlines()[-1])
    assert p.returncode == 0, p.stderr
    items = json.loads(report.read_text())["install"]
    tf = [i for i in items if i["metadata"]["name"].lower() == "tensorflow"]
    assert len(tf) == 1, items
    tf = tf[0]
    version = _requirements("requirements-gpu.txt")[0].split("==")[1]
    assert tf["metadata"]["version"] == version
    assert tf.get("requested_extras") == ["and-cuda"], tf.get("requested_extras")
    url = tf["download_info"]["url"]
    tag = "cp%d%d" % sys.version_info[:2]
    assert url.endswith(".whl") and ("-%s-%s-" % (tag, tag)) in url and "manylinux" in url, url
    # The and-cuda extra pins CUDA 12 and cuDNN 9: the packages and major versions of the
    # libraries setup checks for after installing.
    extra = {}
    for req in tf["metadata"].get("requires_dist", []):
        m = re.match(r"(nvidia-[a-z0-9-]+)\s*==\s*([\d.]+)\s*;\s*extra\s*==\s*['\"]and-cuda['\"]", req)
        if m:
            extra[m.group(1)] = m.group(2)
    libs = subprocess.run(["bash", str(SETUP), "--gpu-libs"], capture_output=True, text=True, check=True).stdout.split()
    package = {
        "nvidia/cuda_runtime/lib/libcudart.so": "nvidia-cuda-runtime-cu12",
        "nvidia/cudnn/lib/libcudnn.so": "nvidia-cudnn-cu12",
        "nvidia/cublas/lib/libcublas.so": "nvidia-cublas-cu12",
    }
    assert len(libs) == len(package), libs
    for lib in libs:
        stem, major = lib.rsplit(".", 1)
        pkg = package[stem]
        assert pkg in extra, (pkg, extra)
        assert extra[pkg].split(".")[0] == major, (lib, pkg, extra[pkg])
