"""ATen ops composed from native tpu kernels and registered for the tpu device: equal (returns a
Python value, which the generic C++ path cannot express; the one device->host read is the result
itself), `addr` (CPU's checks of beta and alpha, then PyTorch's composite) and `addr.out` (PyTorch's
composite copies into an out= on any device; CPU refuses one on another device, as the native tpu path does), `flip` of a quantized tensor (its integers flipped, the
quantizer kept: QuantizedCPU's kernel moves the same bytes), the foreach ops whose per-tensor scalars arrive packed in a CPU tensor
(`_foreach_addcdiv/addcmul(_).Tensor`), which run as their native Scalar[] overloads, and the
fused weight norm pair, whose CPU kernels are a norm and two broadcasts; embedding_bag's weight
gradient, dense or sparse; and the ops PyTorch calls
only on accelerators, which CPU has no kernel for: the fused LSTM and GRU cells, and
nn.TransformerEncoderLayer's inference fast path (`_transformer_encoder_layer_fwd`)."""

import math

import torch
from torch._prims_common.wrappers import _maybe_resize_out

from .tpu_checks import addr_checks, out_cast_check

_lib = torch.library.Library("aten", "IMPL")


def equal(self, other):
    # CPU's cpu_equal: same device required, different sizes are simply unequal, values
    # compare after type promotion and NaN equals nothing (not even itself)
    torch._check(self.device == other.device,
                 lambda: f"Cannot compare two tensors on different devices. Got: {self.device} and {other.device}")
    if self.shape != other.shape:
        return False
    return bool(torch.eq(self, other).all().item())


_lib.impl("equal", equal, "PrivateUse1")


_COMPOSITE = torch._C.DispatchKeySet(torch._C.DispatchKey.CompositeExplicitAutograd)


def addr(self, vec1, vec2, *, beta=1, alpha=1):
    # PyTorch's composite (outer, mul, add) skips CPU's checks of the scalars
    addr_checks(self, vec1, vec2, beta, alpha)
    return torch.ops.aten.addr.default.redispatch(_COMPOSITE, self, vec1, vec2, beta=beta, alpha=alpha)


def addr_(self, vec1, vec2, *, beta=1, alpha=1):
    addr_checks(self, vec1, vec2, beta, alpha)
    return torch.ops.aten.addr_.default.redispatch(_COMPOSITE, self, vec1, vec2, beta=beta, alpha=alpha)


_lib.impl("addr", addr, "PrivateUse1")
_lib.impl("addr_", addr_, "PrivateUse1")


def addr_out(self, vec1, vec2, *, beta=1, alpha=1, out):
    torch._check(out.device == vec1.device,
                 lambda: f"Expected out tensor to have device {vec1.device}, but got {out.device} instead")
    result = torch.addr(self, vec1, vec2, beta=beta, alpha=alpha)
    out_cast_check(result.dtype, out)
    _maybe_resize_out(out, result.shape)  # CPU's resize_output: warns when a non-empty out= changes shape
    return out.copy_(result)


_lib.impl("addr.out", addr_out, "PrivateUse1")


def quantized_flip(self, dims):
    # CPU's kernel builds its output through a strided view, which only a per-tensor quantizer takes
    torch._check(self.qscheme() == torch.per_tensor_affine,
                 lambda: "Setting strides is possible only on uniformly quantized tensor")
    return torch._make_per_tensor_quantized_tensor(torch.flip(self.int_repr(), dims), self.q_scale(),
                                                   self.q_zero_point())


_lib.impl("flip", quantized_flip, "QuantizedPrivateUse1")


def _scalar_list(self, tensor1, tensor2, scalars):
    """CPU's checks (foreach list lengths, then convert_tensor_to_scalar_list's), and the
    scalars as the Python numbers of their dtype, as CPU unpacks them."""
    for other in (tensor1, tensor2):
        torch._check(len(other) == len(self), lambda: "Tensor lists must have the same number of tensors, "
                     f"got {len(self)} and {len(other)}")
    torch._check(scalars.device.type == "cpu", lambda: f"Expected scalars to be on CPU, got {scalars.device} instead.")
    torch._check(scalars.is_contiguous(), lambda: "Expected scalars to be contiguous.")
    torch._check(scalars.dim() == 1,
                 lambda: f"Expected packed scalar Tensor to be of dimension 1. Got {scalars.dim()} instead.")
    torch._check(scalars.size(0) == len(self), lambda: "Expected length of scalars to match input of length "
                 f"{len(self)} but got {scalars.size(0)} instead.")
    return scalars.tolist()


def _packed_scalars(overload):
    return lambda self, tensor1, tensor2, scalars: overload(self, tensor1, tensor2,
                                                            _scalar_list(self, tensor1, tensor2, scalars))


for _name in ("_foreach_addcdiv", "_foreach_addcdiv_", "_foreach_addcmul", "_foreach_addcmul_"):
    _lib.impl(f"{_name}.Tensor", _packed_scalars(getattr(torch.ops.aten, _name).ScalarList), "PrivateUse1")


def _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, maximum_indices, num_weights,
                            scale_grad_by_freq, mode, sparse, per_sample_weights=None, padding_idx=-1):
    # CPU's and CUDA's kernel for the weight's gradient: dense from the native kernel, sparse
    # (EmbeddingBag(sparse=True)) from PyTorch's composite over tpu ops, a COO tensor on tpu. The
    # tpu forward always fills offset2bag, which CPU's recomputes where its fast path left it empty.
    if sparse:
        return torch.ops.aten._embedding_bag_sparse_backward(grad, indices, offsets, offset2bag, bag_size, num_weights,
                                                             scale_grad_by_freq, mode, per_sample_weights, padding_idx)
    return torch.ops.aten._embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices,
                                                        num_weights, scale_grad_by_freq, mode, per_sample_weights,
                                                        padding_idx)


_lib.impl("_embedding_bag_backward", _embedding_bag_backward, "PrivateUse1")


def _weight_norm_parts(v, dim):
    """The accumulation dtype of CPU's fused kernel (float for reduced floats), the dims the
    norm runs over (none for 1-D v: then the norm is |v|), and v in that dtype."""
    torch._check(dim == 0 or dim == v.dim() - 1, lambda: "fused kernels can only be applied for first or last dim")
    acc = torch.float64 if v.dtype == torch.float64 else torch.float32
    return acc, [d for d in range(v.dim()) if d != dim], v.to(acc)


def _weight_norm_interface(v, g, dim=0):
    # nn.utils.weight_norm's fused kernel (wav2vec2/HuBERT positional conv, VITS, EnCodec)
    acc, dims, va = _weight_norm_parts(v, dim)
    norm = torch.linalg.vector_norm(va, 2, dims, keepdim=True) if dims else va.abs()
    w = (va * (g.to(acc) / norm)).to(v.dtype).contiguous()
    return w, norm.reshape(g.shape)


def _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim):
    acc, dims, va = _weight_norm_parts(saved_v, dim)
    norm = saved_norms.to(acc)
    grad_w_times_v = grad_w.to(acc) * va
    grad_g = (grad_w_times_v.sum(dims, keepdim=True) if dims else grad_w_times_v) / norm
    grad_v = (saved_g.to(acc) / norm) * (grad_w.to(acc) - va * (grad_g / norm))
    return grad_v.to(saved_v.dtype), grad_g.to(saved_g.dtype).reshape(saved_g.shape)


_lib.impl("_weight_norm_interface", _weight_norm_interface, "PrivateUse1")
_lib.impl("_weight_norm_interface_backward", _weight_norm_interface_backward, "PrivateUse1")


def _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    # nn.LSTM/LSTMCell on an accelerator call the fused cell (CUDA's), which CPU has no kernel
    # for. The workspace keeps the four activated gates for the backward.
    gates = input_gates + hidden_gates
    if input_bias is not None:
        gates = gates + input_bias + hidden_bias
    i, f, g, o = gates.chunk(4, 1)
    workspace = torch.cat([i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()], 1)
    i, f, g, o = workspace.chunk(4, 1)
    cy = f * cx + i * g
    return o * cy.tanh(), cy, workspace


def _thnn_fused_lstm_cell_backward_impl(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    if grad_hy is None and grad_cy is None:
        return None, None, None
    i, f, g, o = workspace.chunk(4, 1)
    tanh_cy = cy.tanh()
    grad_c = grad_cy if grad_cy is not None else torch.zeros_like(cy)
    if grad_hy is not None:
        grad_c = grad_c + grad_hy * o * (1 - tanh_cy * tanh_cy)
    grad_o = grad_hy * tanh_cy * o * (1 - o) if grad_hy is not None else torch.zeros_like(o)
    grad_gates = torch.cat([grad_c * g * i * (1 - i), grad_c * cx * f * (1 - f), grad_c * i * (1 - g * g), grad_o], 1)
    return grad_gates, grad_c * f, grad_gates.sum(0) if has_bias else None


def _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    # nn.GRU/GRUCell on an accelerator call the fused cell too. The workspace is CUDA's: the
    # reset, update and new gates, hx and the hidden half of the new gate, side by side.
    if input_bias is not None:
        input_gates = input_gates + input_bias
        hidden_gates = hidden_gates + hidden_bias
    ir, ii, in_ = input_gates.chunk(3, 1)
    hr, hi, hn = hidden_gates.chunk(3, 1)
    r = (ir + hr).sigmoid()
    z = (ii + hi).sigmoid()
    n = (in_ + r * hn).tanh()
    return n + z * (hx - n), torch.cat([r, z, n, hx, hn], 1)


def _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias):
    r, z, n, hx, hn = workspace.chunk(5, 1)
    grad_hx = grad_hy * z
    grad_z = grad_hy * (hx - n) * (1 - z) * z
    grad_in = grad_hy * (1 - z) * (1 - n * n)
    grad_r = grad_in * hn * (1 - r) * r
    grad_input_gates = torch.cat([grad_r, grad_z, grad_in], 1)
    grad_hidden_gates = torch.cat([grad_r, grad_z, grad_in * r], 1)
    if not has_bias:
        return grad_input_gates, grad_hidden_gates, grad_hx, None, None
    return grad_input_gates, grad_hidden_gates, grad_hx, grad_input_gates.sum(0), grad_hidden_gates.sum(0)


_lib.impl("_thnn_fused_gru_cell", _thnn_fused_gru_cell, "PrivateUse1")
_lib.impl("_thnn_fused_gru_cell_backward", _thnn_fused_gru_cell_backward, "PrivateUse1")
_lib.impl("_thnn_fused_lstm_cell", _thnn_fused_lstm_cell, "PrivateUse1")
_lib.impl("_thnn_fused_lstm_cell_backward_impl", _thnn_fused_lstm_cell_backward_impl, "PrivateUse1")


def _native_self_attention(x, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, mask, mask_type):
    # PyTorch's _native_multi_head_attention as its encoder fast path calls it (query, key and value
    # all x, batch first): a mask counts as boolean (nonzero masks), shaped [L, L] (mask_type 0),
    # [B, L] (1) or [B, H, L, L] (2); a row with every key masked is NaN, as on CPU.
    batch, length, embed = x.shape
    head = embed // num_heads
    q, k, v = torch.nn.functional.linear(x, qkv_weight, qkv_bias).view(batch, length, 3, num_heads, head).permute(
        2, 0, 3, 1, 4)
    scores = (q / math.sqrt(head)) @ k.transpose(-2, -1)
    if mask is None:
        weights = scores.softmax(-1)
    else:
        masked = mask.to(torch.bool)
        masked = masked.view(batch, 1, 1, length) if mask_type == 1 else masked
        weights = scores.masked_fill(masked, float("-inf")).softmax(-1)
    out = (weights @ v).transpose(1, 2).reshape(batch, length, embed)
    return torch.nn.functional.linear(out, proj_weight, proj_bias)


def _transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu,
                                   norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2,
                                   ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None, mask_type=None):
    # nn.TransformerEncoderLayer's inference fast path (eval, no grad), which PyTorch takes for
    # tpu as for CUDA; the layer as ATen's transformer_encoder_layer_forward composes it.
    if src.numel() == 0:
        return src.clone()

    def norm(x, weight, bias):
        return torch.nn.functional.layer_norm(x, (embed_dim,), weight, bias, eps)

    x = norm(src, norm_weight_1, norm_bias_1) if norm_first else src
    x = _native_self_attention(x, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, mask, mask_type) + src
    if not norm_first:
        x = norm(x, norm_weight_1, norm_bias_1)
    residual = x
    if norm_first:
        x = norm(x, norm_weight_2, norm_bias_2)
    hidden = torch.nn.functional.linear(x, ffn_weight_1, ffn_bias_1)
    hidden = torch.nn.functional.gelu(hidden) if use_gelu else torch.relu(hidden)
    x = torch.nn.functional.linear(hidden, ffn_weight_2, ffn_bias_2) + residual
    return x if norm_first else norm(x, norm_weight_2, norm_bias_2)


_lib.impl("_transformer_encoder_layer_fwd", _transformer_encoder_layer_fwd, "PrivateUse1")
