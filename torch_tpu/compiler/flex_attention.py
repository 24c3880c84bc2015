"""FlexAttention on tpu.

Eager: torch 2.13's `flex_attention` checks the device against a fixed set ({"cuda", "cpu",
"xpu", "hpu", "mps"}, nn/attention/flex_attention.py `_validate_device`) and has no registration
hook for another device. `allow_tpu` lets tpu inputs through that one check and leaves every
other device's answer to torch's own; what runs is the HOP's own dense implementation (forward
and its backward, plain ATen ops on tpu).

Compiled: Inductor's flex lowerings emit Triton for any device but CPU and MPS. The tpu
device's post-grad pass (registered with Inductor for device "tpu") replaces each
flex_attention / flex_attention_backward node on tpu with the ATen graph of the HOP's dense
implementation, which Inductor then fuses and compiles as it does any other tpu graph."""
import operator

import torch
import torch.utils._pytree as pytree


def allow_tpu(module):
    """Wraps `module._validate_device` (module: torch.nn.attention.flex_attention)."""
    torch_check = module._validate_device

    def _validate_device(query, key, value):
        if query.device.type == "tpu":
            return
        torch_check(query, key, value)

    _validate_device.__doc__ = torch_check.__doc__
    module._validate_device = _validate_device


def _dense_implementations():
    import importlib

    hop = importlib.import_module("torch._higher_order_ops.flex_attention")  # the package exports the HOP by that name

    return {torch.ops.higher_order.flex_attention: hop.sdpa_dense,
            torch.ops.higher_order.flex_attention_backward: hop.sdpa_dense_backward}


def _on_tpu(node):
    val = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    return isinstance(val, torch.Tensor) and val.device.type == "tpu"


def decompose(gm):
    """Inlines the dense ATen graph of every flex attention node on tpu in `gm` (post-grad)."""
    dense = _dense_implementations()
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and n.target in dense and _on_tpu(n)]
    for node in nodes:
        _inline_dense(gm, node, dense[node.target])
    if nodes:
        gm.graph.eliminate_dead_code()
        gm.recompile()


def _inline_dense(gm, node, implementation):
    from torch._guards import detect_fake_mode
    from torch.fx.experimental.proxy_tensor import make_fx

    from . import decompositions

    leaves, spec = pytree.tree_flatten((node.args, node.kwargs))
    tensor_at = [i for i, a in enumerate(leaves) if isinstance(a, torch.fx.Node) and
                 isinstance(a.meta.get("val"), torch.Tensor)]
    # subgraphs (score_mod, mask_mod, the joint graph) are get_attr nodes: pass the modules
    constants = [operator.attrgetter(a.target)(gm) if isinstance(a, torch.fx.Node) and a.op == "get_attr" else a
                 for a in leaves]

    def call(*tensors):
        values = list(constants)
        for i, t in zip(tensor_at, tensors):
            values[i] = t
        args, kwargs = pytree.tree_unflatten(values, spec)
        return implementation(*args, **kwargs)

    example = [leaves[i].meta["val"] for i in tensor_at]
    with detect_fake_mode(example):
        traced = make_fx(call, decomposition_table=decompositions(), tracing_mode="real")(*example)
    for n in traced.graph.nodes:  # constants the implementation makes (torch.tensor(-inf))
        if n.op == "get_attr":
            name = _free_name(gm, "_flex_attention_constant")
            setattr(gm, name, getattr(traced, n.target))
            n.target = name
    placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"]
    env = {p: leaves[i] for p, i in zip(placeholders, tensor_at)}
    with gm.graph.inserting_before(node):
        out = gm.graph.graph_copy(traced.graph, env)
    _replace_uses(node, out)
    gm.graph.erase_node(node)


def _free_name(gm, prefix):
    i = 0
    while hasattr(gm, f"{prefix}{i}"):
        i += 1
    return f"{prefix}{i}"


def _replace_uses(node, out):
    """The HOP returns a (possibly nested) tuple its users take apart with getitem."""
    for user in list(node.users):
        if user.op == "call_function" and user.target is operator.getitem:
            part = out[user.args[1]]
            if isinstance(part, torch.fx.Node):
                user.replace_all_uses_with(part)
                user.graph.erase_node(user)
            else:
                _replace_uses(user, part)
                user.graph.erase_node(user)
        else:
            raise NotImplementedError(f"flex attention on tpu: unexpected use {user.format_node()}")
