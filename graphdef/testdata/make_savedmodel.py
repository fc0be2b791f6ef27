"""make_savedmodel.py writes tiny_savedmodel/: a SavedModel with two MetaGraphDefs.

graphdef's tests read it to check tag selection and that writing the graph back keeps the
rest of the SavedModel (variables/, the other MetaGraphDef, signatures) intact.
Run from the repository root: .venv/bin/python graphdef/testdata/make_savedmodel.py
"""
import os
import shutil

import tensorflow as tf

tf1 = tf.compat.v1


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_savedmodel")
    if os.path.exists(out):
        shutil.rmtree(out)
    tf1.disable_eager_execution()
    tf1.set_random_seed(7)
    g = tf1.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [4, 8], name="input")
        w = tf1.get_variable("w", [8, 2], use_resource=True)
        y = tf.matmul(x, w, name="logits")
        loss = tf.reduce_sum(y * y, name="loss")
        train = tf1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
        with tf1.Session(graph=g) as s:
            s.run(tf1.global_variables_initializer())
            b = tf1.saved_model.Builder(out)
            sig = tf1.saved_model.predict_signature_def({"x": x}, {"y": y})
            b.add_meta_graph_and_variables(s, ["train"], signature_def_map={"serving_default": sig})
            b.add_meta_graph(["serve"], signature_def_map={"serving_default": sig})
            b.save()
    print("wrote", out)


if __name__ == "__main__":
    main()
