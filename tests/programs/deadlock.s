# deadlock.s: the MATMUL waits for a token from the vector queue that nothing ever pushes.
.layer gemm MatMul
LOAD layer=gemm signal=matrix dtype=int8 buf=input dram=0x0 sram=0x0 size0=64 size1=1 size2=1 size3=1
MATMUL layer=gemm wait=load|vector dtype=int8 a=0x0 a_stride=8 b=0x0 c=0x0 m=8 k=8 n=8 acc=0 preloaded=0
HALT
