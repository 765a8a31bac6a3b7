// Kernels of the convolutional ops of the standard library (conv_stem,
// bottleneck, basic_block, pooled_fc): a ResNet executed from the plan's
// layer attributes. Images travel as rows of C*H*W floats, channel-major then
// row-major (MicroBatch::features for the first layer, the trunk after it);
// images are square, of side `size`.
//
// Normalisation is chosen per layer by its `norm` attribute:
// - "batch": batch norm, statistics per channel over the micro batch; the
//   executor may make them span several replicas and supplies the running
//   statistics evaluation normalises with (BatchNormContext, kernel.h);
// - "group": group norm over `norm_groups` groups of channels per sample
//   (Wu and He 2018), independent of the micro batch and of the mapping.
#pragma once

#include <memory>

#include "runtime/emulator/kernels/kernel.h"
#include "runtime/runnable/runnable.h"

namespace ipu::emu {

// The kernel of a conv_stem, bottleneck, basic_block or pooled_fc layer whose
// attributes the kernel table accepts (makeKernel checks them first).
Expected<std::unique_ptr<Kernel>> makeConvKernel(const ir::Layer& layer);

// A layer's trunk widths and a convolution's output side: the table's
// arithmetic (runtime/runnable/runnable.h), which the stack checks share.
using runnable::ImageWidths;
using runnable::imageWidths;
using runnable::convOutSize;

// A 2-D convolution of square images, without bias: `x` is [N, cin*size*size],
// `w` is [cout, (cin/groups)*k*k] (PyTorch's [cout, cin/groups, k, k]
// flattened), the result [N, cout*o*o] with o = convOutSize(size, k, stride, pad).
struct ConvGeometry {
  int cin = 0, cout = 0, size = 0, k = 1, stride = 1, pad = 0, groups = 1;
  int outSize() const { return convOutSize(size, k, stride, pad); }
};
Mat conv2d(const Mat& x, const Mat& w, const ConvGeometry& g, Numerics& nx);
// Gradients of conv2d: `dw` always, `dx` when non-null.
void conv2dBackward(const Mat& x, const Mat& w, const Mat& dy, const ConvGeometry& g, Numerics& nx, Mat* dx, Mat& dw);

}  // namespace ipu::emu
