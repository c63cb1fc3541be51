# all_opcodes.s: a tiny int8 network that uses every npusim opcode.
#
#   image (4x4x2, HWC) -> conv1 3x3 pad 1 (2 -> 4 channels) + bias -> requantize -> relu
#                      -> fc (64 -> 2, weights preloaded) -> softmax on the host CPU
#
# Token traffic (every push has exactly one pop):
#   load -> matrix : 3 pushes (image, conv1 weights, fc weights)  pops: NOP, CONV, PRELOAD
#   load -> vector : 1 push (bias)                                pop: VEC add
#   matrix -> vector, vector -> matrix, matrix -> store, store -> host: one each
#
# No .machine lines: the program is not tied to one NPU configuration.

.layer conv1 Conv
.layer relu1 Relu
.layer fc Gemm
.layer softmax Softmax
.hostop softmax Softmax 24            # 2 elements: exp, sum, divide
.tensor input image int8 0x0 1x2x4x4  # ONNX shape (NCHW); stored HWC at DRAM 0x0
.tensor output probs fp32 0x4000 1x2
# conv1 weights [r*s*in_c = 18 rows x n = 4] int8
.data 0x1000 fdff0103fe0002fdff0103fe0002fdff0103fe0002fdff0103fe0002fdff0103fe0002fdff0103fe0002fdff0103fe0002fdff0103fe0002fdff0103fe0002fdff0103fe0002fdff
# fc weights [k = 64 x n = 2] int8
.data 0x1048 fc0403020100fffefdfc0403020100fffefdfc0403020100fffefdfc0403020100fffefdfc0403020100fffefdfc0403020100fffefdfc0403020100fffefdfc0403020100fffefdfc0403020100fffefdfc0403020100fffefdfc0403020100fffefdfc0403020100fffefdfc0403020100fffefdfc0403020100fffefdfc04
# conv1 bias, 4 x int32: 100, -50, 0, 25
.data 0x10c8 64000000ceffffff0000000019000000

# The image with a one-pixel halo of zeros: SRAM box 2 x 6 x 6 at input 0x0.
LOAD layer=conv1 signal=matrix dtype=int8 buf=input dram=0x0 sram=0x0 size0=2 size1=4 size2=4 size3=1 stride1=2 stride2=8 stride3=32 pad_top=1 pad_bottom=1 pad_left=1 pad_right=1 pad_value=0
LOAD layer=conv1 signal=matrix dtype=int8 buf=weight dram=0x1000 sram=0x0 size0=72 size1=1 size2=1 size3=1
LOAD layer=conv1 signal=vector dtype=int32 buf=acc dram=0x10c8 sram=0x200 size0=4 size1=1 size2=1 size3=1
LOAD layer=fc signal=matrix dtype=int8 buf=weight dram=0x1048 sram=0x100 size0=128 size1=1 size2=1 size3=1

# DMA engines may finish out of order: take the image's token first, then the weights'.
NOP layer=conv1 wait=load
CONV layer=conv1 wait=load signal=vector dtype=int8 a=0x0 b=0x0 c=0x0 in_h=6 in_w=6 in_c=2 out_h=4 out_w=4 n=4 kernel_h=3 kernel_w=3 stride_h=1 stride_w=1 dilation_h=1 dilation_w=1 acc=0 preloaded=0

# 16 pixels x 4 channels of int32: add the bias row, requantize to int8 (x * 2^30 >> 31: halve), relu.
VEC layer=conv1 wait=matrix|load op=add dtype=int32 dtype_out=int32 src1_buf=acc src1=0x0 src2_buf=acc src2=0x200 dst_buf=acc dst=0x0 d0=4 d1=16 d2=1 bcast=row
vec layer=conv1 op=requantize dtype=int32 dtype_out=int8 src1_buf=acc src1=0x0 dst_buf=input dst=0x100 d0=4 d1=16 d2=1 imm0=0x40000000 imm1=31 imm2=0
VEC layer=relu1 signal=matrix op=relu dtype=int8 dtype_out=int8 src1_buf=input src1=0x100 dst_buf=input dst=0x100 d0=64 d1=1 d2=1

# fc: the 64 x 2 weights stay in the array; the 64 activations stream through once.
PRELOAD layer=fc wait=load|vector dtype=int8 buf=weight sram=0x100 rows=64 cols=2 row_stride=2
MATMUL layer=fc signal=store dtype=int8 a=0x100 a_stride=64 b=0x100 c=0x100 m=1 k=64 n=2 acc=0 preloaded=1
STORE layer=fc wait=matrix signal=host dtype=int32 buf=acc dram=0x4000 sram=0x100 size0=2 size1=1 size2=1 size3=1 stride1=2 stride2=2 stride3=2

# Softmax falls back to the CPU: 8 bytes of logits over the link, 8 bytes of probabilities back.
HOSTCALL layer=softmax wait=store host_op=0 in_bytes=8 out_bytes=8 cpu_ops=24

BARRIER
HALT
