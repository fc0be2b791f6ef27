#!/usr/bin/env python3
"""Writes the .npy files the npy package's tests read, with NumPy itself.

    .venv/bin/python internal/npy/testdata/gen.py

The expected values are repeated in npy_test.go; rerunning gives identical files.
"""

import os

import numpy as np
from numpy.lib import format as npf

HERE = os.path.dirname(os.path.abspath(__file__))


def save(name, arr, version=None):
    with open(os.path.join(HERE, name), "wb") as f:
        if version is None:
            np.save(f, arr, allow_pickle=False)
        else:
            npf.write_array(f, arr, version=version, allow_pickle=False)


save("f4_2x3.npy", (np.arange(6, dtype="<f4").reshape(2, 3) * 0.5 - 1))
save("f8_scalar.npy", np.array(-2.5, dtype="<f8"))
save("i4_4.npy", np.array([-2, -1, 0, 2**31 - 1], dtype="<i4"))
save("i8_2x2.npy", np.array([[-2**63, 1], [2, 2**63 - 1]], dtype="<i8"))
save("b1_3.npy", np.array([True, False, True]))
save("u1_0x4.npy", np.zeros((0, 4), dtype="u1"))
save("f4_v2.npy", np.array([1.5, -0.0, np.inf], dtype="<f4"), version=(2, 0))
save("i4_v3.npy", np.array([[7], [8]], dtype="<i4"), version=(3, 0))
save("fortran.npy", np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)))
save("bigendian.npy", np.array([1, 2], dtype=">f4"))
save("complex.npy", np.array([1 + 2j], dtype="<c8"))
save("structured.npy", np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))
