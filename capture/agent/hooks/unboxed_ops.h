#pragma once

// The ops the dispatcher hook has kernels of its own for (dispatch_hook.cpp,
// UnboxedCall): the ones a training step calls most, forward (linear layers,
// activations, norms, attention, losses), backward (their gradients) and in
// optimizers (Adam's and SGD's element-wise updates, item()). Every other op
// reaches the hook's boxed fallback; both do the same work. Each is torch's
// generated at::_ops struct of one overload, as its schema gives it.

#include <ATen/ops/_local_scalar_dense_ops.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_ops.h>
#include <ATen/ops/_to_copy_ops.h>
#include <ATen/ops/_unsafe_view_ops.h>
#include <ATen/ops/abs_ops.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addcdiv_ops.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/cat_ops.h>
#include <ATen/ops/clamp_ops.h>
#include <ATen/ops/clone_ops.h>
#include <ATen/ops/contiguous_ops.h>
#include <ATen/ops/copy_ops.h>
#include <ATen/ops/cross_entropy_loss_ops.h>
#include <ATen/ops/detach_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/dropout_ops.h>
#include <ATen/ops/embedding_dense_backward_ops.h>
#include <ATen/ops/embedding_ops.h>
#include <ATen/ops/empty_like_ops.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/expand_ops.h>
#include <ATen/ops/fill_ops.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/item_ops.h>
#include <ATen/ops/layer_norm_ops.h>
#include <ATen/ops/lerp_ops.h>
#include <ATen/ops/linalg_vector_norm_ops.h>
#include <ATen/ops/linear_ops.h>
#include <ATen/ops/log_ops.h>
#include <ATen/ops/log_softmax_ops.h>
#include <ATen/ops/masked_fill_ops.h>
#include <ATen/ops/matmul_ops.h>
#include <ATen/ops/maximum_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/mse_loss_backward_ops.h>
#include <ATen/ops/mse_loss_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/native_dropout_backward_ops.h>
#include <ATen/ops/native_dropout_ops.h>
#include <ATen/ops/native_layer_norm_backward_ops.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/nll_loss_backward_ops.h>
#include <ATen/ops/nll_loss_forward_ops.h>
#include <ATen/ops/ones_like_ops.h>
#include <ATen/ops/permute_ops.h>
#include <ATen/ops/pow_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/reshape_ops.h>
#include <ATen/ops/rms_norm_ops.h>
#include <ATen/ops/rsqrt_ops.h>
#include <ATen/ops/scaled_dot_product_attention_ops.h>
#include <ATen/ops/select_ops.h>
#include <ATen/ops/sigmoid_backward_ops.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/silu_backward_ops.h>
#include <ATen/ops/silu_ops.h>
#include <ATen/ops/slice_ops.h>
#include <ATen/ops/softmax_ops.h>
#include <ATen/ops/split_ops.h>
#include <ATen/ops/sqrt_ops.h>
#include <ATen/ops/squeeze_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/t_ops.h>
#include <ATen/ops/tanh_backward_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <ATen/ops/to_ops.h>
#include <ATen/ops/transpose_ops.h>
#include <ATen/ops/unsqueeze_ops.h>
#include <ATen/ops/view_as_ops.h>
#include <ATen/ops/view_ops.h>
#include <ATen/ops/where_ops.h>
#include <ATen/ops/zero_ops.h>
#include <ATen/ops/zeros_like_ops.h>

namespace meshscope::capture {

template <class... Ops>
struct OpList {};

// clang-format off
using UnboxedOps = OpList<
    at::_ops::linear,
    at::_ops::mm,
    at::_ops::addmm,
    at::_ops::bmm,
    at::_ops::matmul,
    at::_ops::t,
    at::_ops::transpose_int,
    at::_ops::permute,
    at::_ops::view,
    at::_ops::reshape,
    at::_ops::_unsafe_view,
    at::_ops::expand,
    at::_ops::contiguous,
    at::_ops::clone,
    at::_ops::detach,
    at::_ops::view_as,
    at::_ops::unsqueeze,
    at::_ops::squeeze_dim,
    at::_ops::split_Tensor,
    at::_ops::cat,
    at::_ops::slice_Tensor,
    at::_ops::select_int,
    at::_ops::add_Tensor,
    at::_ops::add__Tensor,
    at::_ops::sub_Tensor,
    at::_ops::sub__Tensor,
    at::_ops::mul_Tensor,
    at::_ops::mul__Tensor,
    at::_ops::mul_Scalar,
    at::_ops::div_Tensor,
    at::_ops::div__Tensor,
    at::_ops::div_Scalar,
    at::_ops::pow_Tensor_Scalar,
    at::_ops::neg,
    at::_ops::sqrt,
    at::_ops::rsqrt,
    at::_ops::exp,
    at::_ops::log,
    at::_ops::relu,
    at::_ops::gelu,
    at::_ops::silu,
    at::_ops::sigmoid,
    at::_ops::tanh,
    at::_ops::threshold_backward,
    at::_ops::gelu_backward,
    at::_ops::silu_backward,
    at::_ops::sigmoid_backward,
    at::_ops::tanh_backward,
    at::_ops::lerp__Scalar,
    at::_ops::addcmul_,
    at::_ops::addcdiv_,
    at::_ops::where_self,
    at::_ops::masked_fill_Scalar,
    at::_ops::clamp,
    at::_ops::copy_,
    at::_ops::fill__Scalar,
    at::_ops::zero_,
    at::_ops::ones_like,
    at::_ops::zeros_like,
    at::_ops::empty_like,
    at::_ops::_to_copy,
    at::_ops::to_dtype,
    at::_ops::to_dtype_layout,
    at::_ops::to_other,
    at::_ops::abs,
    at::_ops::maximum,
    at::_ops::sum,
    at::_ops::sum_dim_IntList,
    at::_ops::mean,
    at::_ops::mean_dim,
    at::_ops::_softmax,
    at::_ops::_log_softmax,
    at::_ops::softmax_int,
    at::_ops::log_softmax_int,
    at::_ops::_softmax_backward_data,
    at::_ops::_log_softmax_backward_data,
    at::_ops::native_layer_norm,
    at::_ops::native_layer_norm_backward,
    at::_ops::layer_norm,
    at::_ops::embedding,
    at::_ops::embedding_dense_backward,
    at::_ops::nll_loss_forward,
    at::_ops::nll_loss_backward,
    at::_ops::cross_entropy_loss,
    at::_ops::dropout,
    at::_ops::native_dropout,
    at::_ops::native_dropout_backward,
    at::_ops::scaled_dot_product_attention,
    at::_ops::item,
    at::_ops::_local_scalar_dense,
    at::_ops::linalg_vector_norm,
    at::_ops::rms_norm,
    at::_ops::mse_loss,
    at::_ops::mse_loss_backward>;
// clang-format on

}  // namespace meshscope::capture
