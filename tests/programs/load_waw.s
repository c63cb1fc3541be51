# load_waw.s: two LOADs of one queue write the same 64 bytes of the accumulator, the later one last in
# program order. On two DMA engines the later one is handed to the engine that frees up sooner (that
# engine's earlier transfer is 1 KiB into the weight buffer, the other's 128 KiB into the input
# scratchpad), so its transfer starts first. The bytes must still be the later LOAD's (DRAM 0x30000),
# as the queue's program order says.
.layer waw Load
LOAD layer=waw dtype=int8 buf=input dram=0x0 sram=0x0 size0=4096 size1=32 size2=1 size3=1 stride1=4096 stride2=0 stride3=0
LOAD layer=waw dtype=int8 buf=weight dram=0x20000 sram=0x0 size0=1024 size1=1 size2=1 size3=1 stride1=1024 stride2=0 stride3=0
LOAD layer=waw dtype=int8 buf=acc dram=0x28000 sram=0x0 size0=64 size1=1 size2=1 size3=1 stride1=64 stride2=0 stride3=0
LOAD layer=waw dtype=int8 buf=acc dram=0x30000 sram=0x0 size0=64 size1=1 size2=1 size3=1 stride1=64 stride2=0 stride3=0
HALT
