"""Samples for the fused attention kernels (scaled_dot_product_attention's "overrideable"
backend): plain, causal, additive and boolean masks (broadcast), explicit scale, and
grouped-query attention; gradients of q, k and v."""
import torch

from samples import FLOATS, make, register

F = torch.nn.functional
OPS = "_scaled_dot_product_fused_attention_overrideable _scaled_dot_product_fused_attention_overrideable_backward"


def qkv(hq=3, hk=3, L=5, S=7, E=8, Ev=6):
    return lambda dt: [make((2, hq, L, E), dt), make((2, hk, S, E), dt, seed=1), make((2, hk, S, Ev), dt, seed=2)]


register(OPS, lambda q, k, v: F.scaled_dot_product_attention(q, k, v), qkv(), dtypes=FLOATS, name="sdpa")
register(OPS, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), qkv(L=6, S=6),
         dtypes=FLOATS, name="sdpa causal")
register(OPS, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m.detach()),
         lambda dt: qkv()(dt) + [make((5, 7), dt, seed=3)], dtypes=FLOATS, name="sdpa additive mask")
register(OPS, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
         lambda dt: qkv()(dt) + [make((2, 1, 5, 7), torch.bool, seed=4) | (torch.arange(7) == 0)],
         dtypes=(torch.float32,), name="sdpa bool mask")
register(OPS, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3), qkv(), name="sdpa scale")
register(OPS, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
         qkv(hq=4, hk=2, L=6, S=6), dtypes=FLOATS, name="sdpa gqa")
