"""gen_opreg.py writes ops.json: the output signature of every op TensorFlow registers.

tfswap's pure-Go graph view needs the dtype of each output of a node to size its tensors,
and a NodeDef alone does not say how many outputs an op has or which attr types them. This
script reads TensorFlow's own op registry (the OpDefs compiled into the installed wheel)
and keeps, for each op, its output args and the defaults of its type attrs.

Run from the repository root:  .venv/bin/python graphdef/opreg/gen_opreg.py
"""
import json
import os
import sys

import tensorflow as tf
from tensorflow.core.framework import types_pb2
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session as c_api


def _all_ops():
    """_all_ops returns every OpDef registered in this process's TensorFlow runtime."""
    buf = c_api.TF_GetAllOpList()
    try:
        data = c_api.TF_GetBuffer(buf)
    finally:
        c_api.TF_DeleteBuffer(buf)
    return op_def_pb2.OpList.FromString(data).op


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops.json")
    ops = {}
    for op_def in sorted(_all_ops(), key=lambda o: o.name):
        name = op_def.name
        defaults = {}
        for attr in op_def.attr:
            if attr.type == "type" and attr.HasField("default_value"):
                defaults[attr.name] = types_pb2.DataType.Name(attr.default_value.type)
            elif attr.type == "list(type)" and attr.HasField("default_value"):
                defaults[attr.name] = [types_pb2.DataType.Name(t) for t in attr.default_value.list.type]
            elif attr.type == "int" and attr.HasField("default_value"):
                defaults[attr.name] = attr.default_value.i
        outputs = []
        for arg in op_def.output_arg:
            o = {"name": arg.name}
            if arg.type:
                o["type"] = types_pb2.DataType.Name(arg.type)
            if arg.type_attr:
                o["type_attr"] = arg.type_attr
            if arg.number_attr:
                o["number_attr"] = arg.number_attr
            if arg.type_list_attr:
                o["type_list_attr"] = arg.type_list_attr
            if arg.is_ref:
                o["is_ref"] = True
            outputs.append(o)
        entry = {"outputs": outputs}
        if defaults:
            entry["defaults"] = defaults
        if op_def.is_stateful:
            entry["stateful"] = True
        ops[name] = entry
    doc = {"tensorflow_version": tf.__version__, "ops": ops}
    with open(out + ".tmp", "w") as f:
        json.dump(doc, f, sort_keys=True, separators=(",", ":"))
        f.write("\n")
    os.replace(out + ".tmp", out)
    print("wrote %s: %d ops from TensorFlow %s" % (out, len(ops), tf.__version__), file=sys.stderr)


if __name__ == "__main__":
    main()
