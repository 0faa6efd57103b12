"""The operators that do no multiply-accumulate work, listed by name.

:func:`torchwise.model.flops.classify` recognises pointwise, reduction, view and
view-copy ops by their aten tags; this table lists every other op known to cost
no MACs under the FLOP convention (see :mod:`torchwise.model.flops`), by what it
does. It is explicit on purpose: an op that is not here, has no tag and no
formula is reported as unsupported, never guessed from its name (a substring
list once zeroed ``_weight_int4pack_mm_with_scales_and_zeros`` because its name
contains "zero"). In-place variants (``hardswish_``) follow their functional op.
"""

from __future__ import annotations

from typing import Any

import torch

aten = torch.ops.aten


def _packets(*names: str) -> frozenset[Any]:
    # An op missing from this torch version cannot be dispatched: skipping it is exact.
    return frozenset(getattr(aten, name) for name in names if hasattr(aten, name))


# fmt: off
#: category -> the aten op packets in it
NO_MAC_OPS: dict[str, frozenset[Any]] = {
    "normalisation": _packets(
        "native_batch_norm", "native_batch_norm_backward", "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training", "_native_batch_norm_legit_functional",
        "_batch_norm_with_update", "_batch_norm_with_update_functional", "_batch_norm_no_update",
        "batch_norm_backward", "cudnn_batch_norm", "cudnn_batch_norm_backward",
        "miopen_batch_norm", "miopen_batch_norm_backward", "native_layer_norm",
        "native_layer_norm_backward", "native_group_norm", "native_group_norm_backward",
        "_fused_rms_norm", "_fused_rms_norm_backward", "rms_norm", "_weight_norm_interface",
        "_weight_norm_interface_backward", "renorm", "_foreach_norm",
    ),
    "softmax": _packets(
        "_softmax", "_log_softmax", "_safe_softmax", "_masked_softmax", "softmax", "log_softmax",
        "_softmax_backward_data", "_log_softmax_backward_data", "_masked_softmax_backward",
    ),
    "activation": _packets(
        "hardswish", "hardswish_backward", "hardsigmoid_backward", "leaky_relu_backward",
        "elu_backward", "softplus_backward", "mish_backward", "hardtanh_backward", "glu",
        "glu_backward", "_prelu_kernel", "_prelu_kernel_backward", "floor_divide",
        "log_sigmoid_forward", "log_sigmoid_backward", "rrelu_with_noise",
        "rrelu_with_noise_backward", "subtract", "multiply", "divide", "true_divide", "not_equal",
        "greater_equal", "less_equal", "copysign",
    ),
    "pooling": _packets(
        "max_pool2d_with_indices", "max_pool2d_with_indices_backward", "max_pool3d_with_indices",
        "max_pool3d_with_indices_backward", "avg_pool2d", "avg_pool2d_backward", "avg_pool3d",
        "avg_pool3d_backward", "_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward",
        "_adaptive_avg_pool3d", "_adaptive_avg_pool3d_backward", "adaptive_max_pool2d",
        "adaptive_max_pool2d_backward", "max_pool2d", "avg_pool1d", "max_pool1d",
        "adaptive_max_pool3d", "adaptive_max_pool3d_backward", "fractional_max_pool2d",
        "fractional_max_pool2d_backward", "fractional_max_pool3d",
        "fractional_max_pool3d_backward", "max_unpool2d", "max_unpool3d",
    ),
    "resampling": _packets(
        "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
        "_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d",
        "upsample_linear1d", "upsample_bilinear2d", "upsample_bicubic2d", "upsample_trilinear3d",
        "upsample_nearest1d_backward", "upsample_nearest2d_backward",
        "upsample_nearest3d_backward", "_upsample_nearest_exact2d_backward",
        "upsample_bilinear2d_backward", "upsample_bicubic2d_backward", "grid_sampler_2d",
        "grid_sampler_2d_backward", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
        "native_channel_shuffle", "im2col", "col2im", "_upsample_bilinear2d_aa",
        "_upsample_bilinear2d_aa_backward", "_upsample_bicubic2d_aa",
        "_upsample_bicubic2d_aa_backward", "grid_sampler_3d", "grid_sampler_3d_backward",
        "_upsample_lanczos2d_aa", "_upsample_lanczos2d_aa_backward",
    ),
    "padding": _packets(
        "constant_pad_nd", "reflection_pad1d", "reflection_pad2d", "reflection_pad3d",
        "reflection_pad2d_backward", "replication_pad1d", "replication_pad2d", "replication_pad3d",
        "replication_pad2d_backward", "_pad_circular", "_pad_enum", "reflection_pad1d_backward",
        "reflection_pad3d_backward", "replication_pad1d_backward", "replication_pad3d_backward",
        "pad_sequence", "_pack_padded_sequence", "_pad_packed_sequence",
    ),
    "random": _packets(
        "bernoulli", "native_dropout", "native_dropout_backward", "rand", "randn", "randint",
        "rand_like", "randn_like", "randint_like", "randperm", "normal", "uniform", "exponential",
        "random", "cauchy", "geometric", "log_normal", "multinomial", "dropout", "alpha_dropout",
        "feature_dropout", "feature_alpha_dropout", "_fused_dropout", "_masked_scale",
        "_philox_key_split", "_philox_normal", "_philox_uniform",
    ),
    "creation": _packets(
        "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "new_zeros",
        "new_ones", "new_full", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
        "arange", "linspace", "eye", "scalar_tensor", "lift_fresh", "tril_indices", "triu_indices",
        "fill", "zero", "empty_permuted", "lift", "lift_fresh_copy", "resize_as",
    ),
    "copy": _packets(
        "_to_copy", "copy", "clone", "_unsafe_view", "resize", "set", "_copy_from",
        "_copy_from_and_resize", "_resize_output", "as_strided_scatter", "slice_scatter",
        "select_scatter", "diagonal_scatter", "select_backward", "slice_backward",
        "diagonal_backward", "unfold_backward", "_reshape_copy", "_dyn_quant_pack_4bit_weight",
        "_jagged_to_padded_dense_forward", "_padded_dense_to_jagged_forward",
        "_nested_tensor_from_tensor_list", "_nested_view_from_buffer_copy",
    ),
    "indexing": _packets(
        "index", "index_put", "_index_put_impl", "index_select", "index_select_backward",
        "index_add", "index_copy", "index_fill", "gather", "gather_backward", "scatter",
        "scatter_add", "scatter_reduce", "masked_scatter", "masked_select", "take", "put", "where",
        "nonzero", "embedding", "embedding_dense_backward", "embedding_backward", "_embedding_bag",
        "_embedding_bag_backward", "_embedding_bag_dense_backward", "embedding_renorm", "one_hot",
        "isin", "searchsorted", "bucketize", "_unsafe_index", "_unsafe_index_put",
        "_unsafe_masked_index", "_unsafe_masked_index_put_accumulate", "index_reduce",
        "nonzero_static", "nonzero_numpy", "masked_scatter_backward",
        "_embedding_bag_forward_only", "_embedding_bag_per_sample_weights_backward",
    ),
    "rearranging": _packets(
        "cat", "stack", "hstack", "vstack", "roll", "flip", "repeat", "repeat_interleave", "tile",
        "tril", "triu", "_chunk_cat", "unsafe_split", "unsafe_split_with_sizes", "unsafe_chunk",
        "fft_fftshift", "fft_ifftshift",
    ),
    "sorting and counting": _packets(
        "sort", "argsort", "topk", "kthvalue", "median", "cumsum", "cumprod", "logcumsumexp",
        "histc", "bincount", "_unique2", "unique_dim", "unique_consecutive", "cummax", "cummin",
        "_unique", "_segment_reduce_backward",
    ),
    "losses": _packets(
        "nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward", "nll_loss2d_backward",
        "mse_loss", "mse_loss_backward", "l1_loss", "smooth_l1_loss", "smooth_l1_loss_backward",
        "huber_loss", "huber_loss_backward", "binary_cross_entropy",
        "binary_cross_entropy_backward", "binary_cross_entropy_with_logits", "soft_margin_loss",
        "soft_margin_loss_backward", "kl_div", "hinge_embedding_loss",
        "multilabel_margin_loss_forward", "multilabel_margin_loss_backward", "multi_margin_loss",
        "multi_margin_loss_backward", "_ctc_loss", "_ctc_loss_backward", "dist",
    ),
    "scalars and checks": _packets(
        "_local_scalar_dense", "item", "equal", "is_nonzero", "is_same_size", "_assert_async",
        "_assert_scalar", "_assert_tensor_metadata", "_functional_assert_async", "sym_size",
        "sym_stride", "sym_numel", "sym_storage_offset", "_make_dep_token",
        "_functional_sym_constrain_range", "sym_constrain_range", "record_stream",
        "storage_offset", "is_contiguous", "is_strides_like_format", "_print",
        "sym_constrain_range_for_size", "_functional_sym_constrain_range_for_size",
    ),
}
# fmt: on

#: Every op in :data:`NO_MAC_OPS`.
NO_MAC: frozenset[Any] = frozenset().union(*NO_MAC_OPS.values())
