"""bfloat16 is optional: present with ml_dtypes, absent (and harmless) without it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import polymm
from polymm import backend as backend_module


def test_import_polymm_does_not_import_ml_dtypes():
    code = "import sys, polymm; polymm.matmul(__import__('numpy').ones((2, 2)), __import__('numpy').ones((2, 2)));"
    code += "print('ml_dtypes' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_without_ml_dtypes_there_is_no_optional_dtype(monkeypatch):
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import fails as if not installed
    backend_module.optional_dtypes.cache_clear()
    try:
        assert backend_module.optional_dtypes() == ()
        assert polymm.get_backend("cpu").dtypes() == backend_module.CONTRACT_DTYPES
    finally:
        backend_module.optional_dtypes.cache_clear()


def test_bfloat16_listed_and_rounded_to_nearest_even():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = np.dtype(ml_dtypes.bfloat16)
    assert "bfloat16" in {i.name: i for i in polymm.backends()}["cpu"].dtypes
    # 1 + 2**-8 is halfway between bfloat16 neighbours 1 and 1 + 2**-7: ties go to the even one (1);
    # 1 + 3 * 2**-8 is halfway between 1 + 2**-7 and 1 + 2**-6: the even one is 1 + 2**-6.
    x1 = np.array([[1.0, 2.0**-8], [1.0, 3 * 2.0**-8]], bf16)
    x2 = np.ones((2, 1), bf16)
    for name in ("cpu", "opencl"):
        if name not in {i.name for i in polymm.backends() if i.available}:
            continue
        result = polymm.matmul(x1, x2, backend=name)
        assert result.dtype == bf16
        np.testing.assert_array_equal(result.astype(np.float32), [[1.0], [1 + 2.0**-6]], err_msg=name)
