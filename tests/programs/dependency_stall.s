# dependency_stall.s: the vector unit's RELU needs the matrix unit's result. It is dispatched right
# away but waits for the token the MATMUL pushes when it completes: a scheduling stall.
.layer gemm MatMul
.layer act Relu
MATMUL layer=gemm signal=vector dtype=int8 a=0x0 a_stride=64 b=0x0 c=0x0 m=64 k=64 n=64 acc=0 preloaded=0
VEC layer=act wait=matrix op=relu dtype=int32 dtype_out=int32 src1_buf=acc src1=0x0 dst_buf=acc dst=0x0 d0=64 d1=64 d2=1
HALT
