"""`make test` runs the Go tests that exist only in a build without cgo (issue 11, item 16):
cmd/tfswap/profile_stub_test.go and tfrun/runtime_required_test.go are compiled only without
the tensorflow tag, so a `make test` that only builds and vets the pure packages never runs
them.

Run:  .venv/bin/python -m pytest -q tests/python/test_makefile.py   (a few seconds)
"""

import os
import pathlib
import shlex
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The tests that only a build without the tensorflow tag holds, by package.
NO_TAG_TESTS = {
    "./cmd/tfswap": "TestRuntimeCommandsWithoutTensorFlow",
    "./tfrun": "TestTensorFlowRuntimeRequired",
}


def _recipe(target):
    """The commands `make TARGET` runs, without running them."""
    p = subprocess.run(["make", "-n", "--no-print-directory", target], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return [shlex.split(line) for line in p.stdout.splitlines() if line.strip()]


def test_make_test_depends_on_test_pure():
    p = subprocess.run(["make", "-n", "--no-print-directory", "-p", "test-pure"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    deps = [line for line in p.stdout.splitlines() if line.startswith("test:")]
    assert deps and "test-pure" in deps[0].split(), deps


def test_test_pure_runs_the_no_cgo_tests():
    runs = []
    for argv in _recipe("test-pure"):
        env = {}
        while argv and "=" in argv[0] and not argv[0].startswith("-"):
            k, v = argv.pop(0).split("=", 1)
            env[k] = v
        if len(argv) >= 2 and argv[0].endswith("go") and argv[1] == "test":
            runs.append((env, argv[2:]))
    assert runs, "make test-pure runs no `go test`"
    for pkg, test in NO_TAG_TESTS.items():
        covered = [(env, args) for env, args in runs
                   if env.get("CGO_ENABLED") == "0" and "-tags" not in " ".join(args)
                   and any(a in (pkg, pkg + "/...", os.path.dirname(pkg) + "/...") for a in args)]
        assert covered, f"make test-pure does not run `CGO_ENABLED=0 go test` on {pkg} ({test} never runs)"


def test_no_tag_tests_exist_in_the_pure_build():
    # The tests named above really are in the packages' builds without cgo, so running the
    # packages runs them.
    env = dict(os.environ, CGO_ENABLED="0")
    for pkg, test in NO_TAG_TESTS.items():
        p = subprocess.run(["go", "test", "-list", test, pkg], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        assert test in p.stdout.split(), p.stdout
