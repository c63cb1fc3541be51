# gemm_layer.s: a fixed int8 GEMM layer (M = 256 in two tiles of 128, K = 128, N = 64) for the sweep
# tests. Being a program and not a model, its tiling is the same on every configuration, so a sweep
# over array sizes, DRAM models and SRAM sizes changes only the machine: the matrix unit's folds
# (ceil(K/rows) x ceil(N/cols) per tile), the DRAM timing, and nothing else. It fits scratchpads of
# 64 KiB (input: two 16 KiB tiles and two 8 KiB outputs; weight: 8 KiB; accumulator: two 32 KiB tiles).
.layer fc Gemm
.layer requant Requantize
LOAD layer=fc signal=matrix dtype=int8 buf=weight dram=0x100000 sram=0x0 size0=8192 size1=1 size2=1 size3=1
LOAD layer=fc signal=matrix dtype=int8 buf=input dram=0x0 sram=0x0 size0=16384 size1=1 size2=1 size3=1
LOAD layer=fc signal=matrix dtype=int8 buf=input dram=0x4000 sram=0x4000 size0=16384 size1=1 size2=1 size3=1
NOP layer=fc wait=load
MATMUL layer=fc wait=load signal=vector dtype=int8 a=0x0 a_stride=128 b=0x0 c=0x0 m=128 k=128 n=64 acc=0 preloaded=0
MATMUL layer=fc wait=load signal=vector dtype=int8 a=0x4000 a_stride=128 b=0x0 c=0x8000 m=128 k=128 n=64 acc=0 preloaded=0
VEC layer=requant wait=matrix signal=store op=requantize dtype=int32 dtype_out=int8 src1_buf=acc src1=0x0 dst_buf=input dst=0x8000 d0=64 d1=128 d2=1 imm0=0x40000000 imm1=31 imm2=0
VEC layer=requant wait=matrix signal=store op=requantize dtype=int32 dtype_out=int8 src1_buf=acc src1=0x8000 dst_buf=input dst=0xA000 d0=64 d1=128 d2=1 imm0=0x40000000 imm1=31 imm2=0
STORE layer=requant wait=vector dtype=int8 buf=input dram=0x200000 sram=0x8000 size0=8192 size1=1 size2=1 size3=1
STORE layer=requant wait=vector dtype=int8 buf=input dram=0x202000 sram=0xA000 size0=8192 size1=1 size2=1 size3=1
HALT
