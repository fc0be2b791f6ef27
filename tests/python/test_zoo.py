"""The zoo (testmodels/zoo.py, testmodels/zoo/): the committed graphs match their sidecars,
and regenerating the small ones gives the same bytes (the whole zoo: make zoo-check, a
quarter of an hour on 2 cores)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ZOO = ROOT / "testmodels" / "zoo"
sys.path.insert(0, str(ROOT / "testmodels"))


def _committed():
    import zoo  # noqa: E402
    return [n for n in zoo.MODELS if n not in zoo.BIG]


def test_committed_graphs_match_their_sidecars():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    names = _committed()
    assert len(names) == 10, names
    for name in names:
        side = json.loads((ZOO / (name + ".json")).read_text())
        gd = tf.compat.v1.GraphDef()
        gd.ParseFromString((ZOO / (name + ".pb")).read_bytes())
        assert len(gd.node) == side["node_count"], name
        assert len(gd.library.function) == side["function_count"], name
        nodes = {n.name for n in gd.node}
        for op in ("loss", side["train_op"], side["init_op"]):
            assert op in nodes, (name, op)
        for v in side["variables"]:
            assert v["fetch"].split(":")[0] in nodes, (name, v)
        for f in side["feeds"]:
            assert (ZOO / f["file"]).exists(), (name, f)
        shaped = sum(1 for n in gd.node if "_output_shapes" in n.attr)
        assert shaped == side["nodes_with_output_shapes"], name
        assert (shaped == 0) == (name == "noshapes"), name


@pytest.mark.parametrize("name", ["tffunction", "concrete"])
def test_regenerating_gives_the_same_bytes(tmp_path, name):
    p = subprocess.run([sys.executable, str(ROOT / "testmodels" / "zoo.py"), "--only", name,
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    for f in sorted(tmp_path.iterdir()):
        assert f.read_bytes() == (ZOO / f.name).read_bytes(), f.name
