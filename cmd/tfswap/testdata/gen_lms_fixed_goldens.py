"""gen_lms_fixed_goldens.py OLD_BINARY NEW_BINARY > lms_fixed_goldens.txt

Records what `tfswap rewrite` writes with fixed LMS thresholds, for every committed fixture
and every option set in CASES: the SHA-256 and size of NEW_BINARY's output (asked for
`--strategy lms-fixed`), the SHA-256 of OLD_BINARY's output (the binary of commit c4e1109,
whose rewrite without options was the LMS rewrite), and how many of OLD_BINARY's swap-ins were
gated by a trigger not reachable from the swapped tensor's producer (issue 11, item 8).
TestFixedLMSGoldens checks that today's binary writes NEW_BINARY's bytes, and that it differs
from c4e1109 only where c4e1109 used such triggers. Only binary output is recorded: Go's
prototext inserts whitespace chosen by a hash of the executable, so text output differs
between two builds.

Line format: fixture ext sha256 size c4e1109_sha256 c4e1109_unreachable_triggers | options
Run from the repository root with the project's Python (it reads GraphDefs with TensorFlow).
"""

import hashlib
import json
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "python"))
from test_trigger_reach import _descendants  # noqa: E402

CASES = [
    "",
    "--swapout-threshold 3 --swapin-ahead 1 --swapin-groupby 0 --min-bytes 0",
    "--swapout-threshold 20 --swapin-ahead 4 --swapin-groupby 10 --min-bytes 1MiB",
    "--swapout-threshold 6 --exclude-op Relu --exclude-scope gradients/stage1",
    "--swapin-ahead 3 --compute-device /device:GPU:0 --host-device /device:CPU:0",
    "--swapin-groupby -1 --gate device",
    "--exclude-op Conv2D --min-bytes 16KiB",
    "--compute-device /device:CPU:1 --min-bytes 0",
]


def main(old, new):
    from tensorflow.core.framework import graph_pb2
    tmp = pathlib.Path(tempfile.mkdtemp())
    out, rep = tmp / "out.pb", tmp / "report.json"
    for opts in CASES:
        for f in ["mlp", "cnn", "resnet", "lstm"]:
            model = ROOT / "testmodels" / "fixtures" / (f + ".pb")
            subprocess.run([old, "rewrite", str(model), "-o", str(out), "--report", str(rep)] + opts.split(),
                           check=True, capture_output=True)
            old_sum = hashlib.sha256(out.read_bytes()).hexdigest()
            g = graph_pb2.GraphDef()
            g.ParseFromString(model.read_bytes())
            desc = _descendants(g)
            unreachable = sum(1 for s in json.loads(rep.read_text())["swaps"] or []
                              for si in s["SwapIns"] if si["Trigger"] not in desc(s["Producer"]))
            subprocess.run([new, "rewrite", str(model), "-o", str(out), "--strategy", "lms-fixed"] + opts.split(),
                           check=True, capture_output=True)
            data = out.read_bytes()
            print(f"{f} pb {hashlib.sha256(data).hexdigest()} {len(data)} {old_sum} {unreachable} | {opts}".rstrip())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
