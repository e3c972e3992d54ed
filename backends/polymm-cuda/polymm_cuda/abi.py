"""The argument lists of the CUDA-only kernels (``kernels/*.cu``), in :mod:`polymm.kernels.abi`'s form.

The shared ABI holds the kernels every backend renders; these belong to the tensor-core paths.
Each launch description this package gives the planner carries its list (``"abi"``), from which
the planner packs the arguments and the backend their types, as for the shared kernels.
"""

from __future__ import annotations

from polymm.kernels.abi import SIGNATURES

__all__ = ["TF32_SPLIT", "TF32_FIXUP", "TRANSPOSE", "RESTRIDE", "WGMMA", "WGMMA_SUM", "BYTE_PLANES", "PLANES_SUM"]

_GEMM = SIGNATURES["gemm"]
#: An operand X read as rows along K, whatever its strides: its element offset, then the element
#: strides of its batch, its rows (A's rows, or B's columns) and K.
_ROWS_OF_X = (("X", "in"), ("x_off", "index"), ("x_sb", "index"), ("x_sr", "index"), ("x_sk", "index"))
#: ``kernels/tf32_split.cu``'s ``polymm_tf32_split`` (not rendered): float32 operand X (R rows of KK
#: along K, any strides) as TF32 parts, K-major: part p of row r of batch entry b at
#: P[p*part_stride + (b*R + r)*ld + k]; with 2 parts, F[f_off + (b*R + r)*nkc + k / 512] flags
#: rows holding Inf or NaN.
TF32_SPLIT = (
    ("R", "size"),
    ("KK", "size"),
    ("parts", "size"),
    ("nkc", "size"),
    *_ROWS_OF_X,
    ("P", "out"),
    ("ld", "index"),
    ("part_stride", "index"),
    ("F", "out"),
    ("f_off", "index"),
)
#: ``kernels/tf32_split.cu``'s ``polymm_tf32_fixup``: the "gemm" list, then the flags of
#: TF32_SPLIT (A's rows from 0, B's columns from fb_off): the flagged rows and columns of C
#: recomputed in float32.
TF32_FIXUP = (*_GEMM, ("F", "in"), ("fb_off", "index"), ("nkc", "size"))
#: ``kernels/wgmma.cu``: the "gemm" list, the batch count (its grid is one-dimensional:
#: persistent blocks walk the tiles of every batch entry) and the runs of K of split-K (1: none).
WGMMA = (*_GEMM, ("batch", "size"), ("splits", "size"))
#: ``kernels/wgmma_sum.cu``: C[c_off + i] = the S runs' partial sums W[s * count + i], added in order.
WGMMA_SUM = (("W", "in"), ("count", "index"), ("S", "size"), ("C", "out"), ("c_off", "index"))
#: ``kernels/byte_planes.cu``'s ``polymm_byte_planes_<bytes>``: operand X (R rows of KK along K, any
#: strides) as K-major rows of its byte planes (``side`` 0: A's planes, 1: B's), the segment of each
#: byte pair ``seg`` bytes long, each shift's padded to whole slices (``polymm_cuda.planes.starts``):
#: row r of batch entry b at P[(b*R + r)*ld + start + k], zeros from KK to seg and in the padding.
BYTE_PLANES = (
    ("R", "size"),
    ("KK", "size"),
    ("side", "size"),
    *_ROWS_OF_X,
    ("P", "out"),
    ("ld", "index"),
    ("seg", "index"),
)
#: ``kernels/byte_planes.cu``'s ``polymm_planes_sum_<bytes>``: C[c_off + i] = the sum over the
#: S x per runs of W[run * count + i] shifted left by 8 x (the shift of segment run / per).
PLANES_SUM = (
    ("W", "in"),
    ("count", "index"),
    ("S", "size"),
    ("per", "size"),
    ("C", "out"),
    ("c_off", "index"),
)
#: ``kernels/transpose.cu``: dst[b*C*ld + c*ld + r] = src[s_off + b*s_b + r*s_r + c] for r < R,
#: c < C (raw bits; one matrix per grid z).
TRANSPOSE = (
    ("src", "in"),
    ("s_off", "index"),
    ("s_b", "index"),
    ("s_r", "index"),
    ("dst", "out"),
    ("ld", "index"),
    ("R", "size"),
    ("C", "size"),
)
#: ``kernels/transpose.cu``'s strided copy: dst[b*R*ld + r*ld + c] = src[s_off + b*s_b + r*s_r + c*s_c]
#: for r < R, c < C (raw bits; one matrix per grid z).
RESTRIDE = (
    ("src", "in"),
    ("s_off", "index"),
    ("s_b", "index"),
    ("s_r", "index"),
    ("s_c", "index"),
    ("dst", "out"),
    ("ld", "index"),
    ("R", "size"),
    ("C", "size"),
)
