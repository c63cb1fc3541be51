# bank_conflict.s: an output-stationary GEMM whose A rows are 128 bytes apart. With 8 banks of
# 16 bytes every row of a column lands in the same bank, so the array's per-cycle reads of one
# element per row serialise. The second MATMUL uses rows 16 bytes apart: one bank each, no conflict.
.layer strided MatMul
.layer dense MatMul
MATMUL layer=strided dtype=int8 a=0x0 a_stride=128 b=0x0 c=0x0 m=4 k=8 n=4 acc=0 preloaded=0
MATMUL layer=dense dtype=int8 a=0x0 a_stride=16 b=0x0 c=0x0 m=4 k=8 n=4 acc=0 preloaded=0
HALT
