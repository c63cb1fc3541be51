# dma_bound.s: one 1 MiB contiguous LOAD (32 rows of 32 KiB) into the input scratchpad.
.layer stream Load
LOAD layer=stream dtype=int8 buf=input dram=0x0 sram=0x0 size0=32768 size1=32 size2=1 size3=1 stride1=32768 stride2=0 stride3=0
HALT
