"""Random ops in their deterministic corners (equal to CPU exactly); their statistics and
determinism are tested in test_random.py."""
import torch

from samples import FLOATS, make, register

register("normal_", lambda x: x.normal_(2.0, 0.0), [(4, 5)], dtypes=FLOATS, grad=False)
register("uniform_", lambda x: x.uniform_(-1.5, -1.5), [(3, 7)], dtypes=FLOATS, grad=False)
register("bernoulli_.float", lambda x: (x.bernoulli_(0.0), x.bernoulli_(1.0))[1], [(6, 2)], dtypes=FLOATS,
         grad=False)
register("bernoulli_.Tensor", lambda x, p: x.bernoulli_(p),
         lambda dt: [make((4, 3), dt), torch.tensor([0.0, 1.0, 1.0], dtype=dt)], dtypes=FLOATS, grad=False)
register("bernoulli bernoulli.out", lambda p: torch.bernoulli(p),
         lambda dt: [torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=dt)], dtypes=FLOATS, grad=False)
register("random_.from", lambda x: x.random_(4, 5), [(5,)], dtypes=FLOATS + (torch.int64, torch.int32),
         grad=False)
register("random_.to", lambda x: x.random_(1), [(5,)], dtypes=(torch.int64, torch.uint8), grad=False)
register("random_", lambda x: x.clone().random_() >= 0, [(5,)], dtypes=(torch.int64, torch.int16), grad=False)
register("exponential_", lambda x: x.exponential_(1e30) < 1e-20, [(5,)], dtypes=(torch.float32,), grad=False)
register("geometric_", lambda x: x.geometric_(1 - 1e-12), [(5,)], dtypes=FLOATS + (torch.int64,), grad=False)
register("cauchy_", lambda x: (x.cauchy_(3.0, 1e-30) - 3).abs() < 1e-6, [(5,)], dtypes=FLOATS, grad=False)
register("log_normal_", lambda x: x.log_normal_(0.5, 1e-30), [(4, 3)], dtypes=FLOATS, grad=False)
register("native_dropout", lambda x: torch.ops.aten.native_dropout(x, 0.0, True), [(4, 4)], dtypes=FLOATS)
register("native_dropout", lambda x: torch.ops.aten.native_dropout(x, 0.5, False), [(4, 4)], dtypes=FLOATS,
         name="dropout eval")
register("native_dropout_backward", lambda g, m: torch.ops.aten.native_dropout_backward(g, m, 2.0),
         lambda dt: [make((3, 5), dt), make((3, 5), torch.bool)], dtypes=FLOATS, grad=False)
register("native_dropout_backward.out",
         lambda g, m: torch.ops.aten.native_dropout_backward.out(g, m, 2.0, out=torch.empty_like(g)),
         lambda dt: [make((3, 5), dt), make((3, 5), torch.bool)], dtypes=FLOATS, grad=False)
