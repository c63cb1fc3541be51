# gemm_tile.s: one 8 x 4 x 4 int8 GEMM tile on the matrix unit, nothing else.
# Used on a 4 x 4 array in each dataflow; the test derives the cycles from the fold phases.
.layer gemm MatMul
MATMUL layer=gemm dtype=int8 a=0x0 a_stride=4 b=0x0 c=0x0 m=8 k=4 n=4 acc=0 preloaded=0
HALT
