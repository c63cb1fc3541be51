# chained_matmuls.s: three 8 x 4 x 4 int8 GEMM tiles back to back on the matrix unit, accumulating into
# one output, and one more with a 2-row stream. Used on a 4 x 4 weight-stationary array with and without
# systolic_array.chained_instructions; the test derives the cycles from the fold phases.
.layer gemm MatMul
MATMUL layer=gemm dtype=int8 a=0x0 a_stride=4 b=0x0 c=0x0 m=8 k=4 n=4 acc=0 preloaded=0
MATMUL layer=gemm dtype=int8 a=0x0 a_stride=4 b=0x40 c=0x0 m=8 k=4 n=4 acc=1 preloaded=0
MATMUL layer=gemm dtype=int8 a=0x0 a_stride=4 b=0x80 c=0x0 m=8 k=4 n=4 acc=1 preloaded=0
MATMUL layer=gemm dtype=int8 a=0x0 a_stride=4 b=0xc0 c=0x100 m=2 k=4 n=4 acc=0 preloaded=0
HALT
