// The kernels of GroupBERT's and the Vision Transformer's ops (kernel.h's
// interface; their definitions are in docs/emulator.md, "What is executed"):
//
// - conv_module: x + GroupedPW(GELU(DepthwiseConv(GLU(LN(x) W + b)))), the
//   convolution running along each sequence ("same" padding, never across
//   sequences of a packed sample);
// - grouped_ffn: x + GroupedW2(GELU(LN(x) W1 + b1)) + b2, pre-norm; it splits
//   over a shard group by groups;
// - layer_norm: a LayerNorm of the trunk (the final norm of a pre-norm stack);
// - patch_embedding: images to patch tokens, a class token and positions;
// - token_classifier: LayerNorm and a linear classifier on the class token,
//   softmax cross-entropy.
//
// A grouped projection with `groups` g from n to m features is block
// diagonal: input features [k n/g, (k+1) n/g) feed output features
// [k m/g, (k+1) m/g) only, through block k of a weight stored as [n, m/g]
// (block k is rows [k n/g, (k+1) n/g)), so it holds n m / g weights.
#pragma once

#include <memory>

#include "runtime/emulator/kernels/kernel.h"

namespace ipu::emu {

// The kernel of a conv_module, grouped_ffn, layer_norm, patch_embedding or
// token_classifier layer split over `shards` IPUs, whose attributes the
// kernel table accepts (makeKernel checks them first).
Expected<std::unique_ptr<Kernel>> makeSequenceKernel(const ir::Layer& layer, int shards);

}  // namespace ipu::emu
