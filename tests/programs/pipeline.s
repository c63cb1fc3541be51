# pipeline.s: two layers, double-buffered: loads of tile i+1 overlap the matrix work of tile i,
# the vector unit requantizes each tile, the store queue writes it back. Every push has one pop.
.layer fc1 Gemm
.layer fc2 Gemm
# fc1: tile 0 and 1 (ping-pong halves of the input buffer), shared weights
LOAD layer=fc1 signal=matrix dtype=int8 buf=weight dram=0x100000 sram=0x0 size0=4096 size1=1 size2=1 size3=1
LOAD layer=fc1 signal=matrix dtype=int8 buf=input dram=0x0 sram=0x0 size0=8192 size1=1 size2=1 size3=1
LOAD layer=fc1 signal=matrix dtype=int8 buf=input dram=0x2000 sram=0x8000 size0=8192 size1=1 size2=1 size3=1
NOP layer=fc1 wait=load
MATMUL layer=fc1 wait=load signal=vector dtype=int8 a=0x0 a_stride=64 b=0x0 c=0x0 m=128 k=64 n=64 acc=0 preloaded=0
MATMUL layer=fc1 wait=load signal=vector dtype=int8 a=0x8000 a_stride=64 b=0x0 c=0x8000 m=128 k=64 n=64 acc=0 preloaded=0
VEC layer=fc1 wait=matrix signal=store op=requantize dtype=int32 dtype_out=int8 src1_buf=acc src1=0x0 dst_buf=input dst=0x10000 d0=64 d1=128 d2=1 imm0=0x40000000 imm1=31 imm2=0
VEC layer=fc1 wait=matrix signal=store op=requantize dtype=int32 dtype_out=int8 src1_buf=acc src1=0x8000 dst_buf=input dst=0x12000 d0=64 d1=128 d2=1 imm0=0x40000000 imm1=31 imm2=0
STORE layer=fc1 wait=vector dtype=int8 buf=input dram=0x200000 sram=0x10000 size0=8192 size1=1 size2=1 size3=1
STORE layer=fc1 wait=vector signal=load dtype=int8 buf=input dram=0x202000 sram=0x12000 size0=8192 size1=1 size2=1 size3=1
# fc2 reads fc1's output back after the store completed
LOAD layer=fc2 wait=store signal=matrix dtype=int8 buf=input dram=0x200000 sram=0x0 size0=16384 size1=1 size2=1 size3=1
MATMUL layer=fc2 wait=load signal=vector dtype=int8 a=0x0 a_stride=64 b=0x0 c=0x0 m=256 k=64 n=64 acc=0 preloaded=0
VEC layer=fc2 wait=matrix signal=store op=relu dtype=int32 dtype_out=int32 src1_buf=acc src1=0x0 dst_buf=acc dst=0x0 d0=64 d1=256 d2=1
STORE layer=fc2 wait=vector dtype=int32 buf=acc dram=0x300000 sram=0x0 size0=16384 size1=1 size2=1 size3=1
HALT
