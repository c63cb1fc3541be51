# aligned_dma.s: misaligned_dma.s starting on an alignment boundary.
.layer rows Load
LOAD layer=rows dtype=int8 buf=input dram=0x0 sram=0x0 size0=64 size1=16 size2=1 size3=1 stride1=128 stride2=0 stride3=0
HALT
