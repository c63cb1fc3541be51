# misaligned_dma.s: 16 rows of 64 bytes, 128 bytes apart in DRAM, starting 16 bytes past an
# alignment boundary: every row costs one extra burst.
.layer rows Load
LOAD layer=rows dtype=int8 buf=input dram=0x10 sram=0x0 size0=64 size1=16 size2=1 size3=1 stride1=128 stride2=0 stride3=0
HALT
