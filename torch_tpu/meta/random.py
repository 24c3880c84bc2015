"""Shape functions of random ops whose PyTorch Meta kernel is stricter than CPU's kernel."""
import torch

from . import register, resize_output


def bernoulli_out(self, *, generator=None, out):
    # CPU's bernoulli_out draws into out of any dtype (it is bernoulli_ on out), where the
    # Meta kernel's out wrapper refuses a float result into an integer or bool out.
    resize_output(out, self.shape)
    return out


register("bernoulli.out", bernoulli_out)
