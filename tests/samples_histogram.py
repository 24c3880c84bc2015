"""Samples for histogram and histogramdd: bin counts with and without a range, bin-edge
tensors, weights, density, points on the edges and outside the range, a constant input
(whose range CPU widens by 0.5)."""
import torch

from samples import make, register

F = (torch.float32, torch.float64)


def pts(dt):
    """Random points plus some exactly on linspace edges of [-3, 3] and one outside."""
    x = make((30,), dt)
    x[:5] = torch.tensor([-3.0, 3.0, 0.0, 1.5, 7.0], dtype=dt)
    return x


def _h(res):
    return (res.hist, *res.bin_edges) if isinstance(res.bin_edges, (list, tuple)) else (res.hist, res.bin_edges)


register("histogram.bin_ct", lambda x: _h(torch.histogram(x, 7)), lambda dt: [pts(dt)], dtypes=F, grad=False)
register("histogram.bin_ct", lambda x, w: _h(torch.histogram(x, 4, range=(-3.0, 3.0), weight=w, density=True)),
         lambda dt: [pts(dt).view(5, 6), make((5, 6), dt, low=0, high=2, seed=1)], dtypes=F, grad=False,
         name="histogram range weight density")
register("histogram.bin_ct", lambda x: _h(torch.histogram(x, 3)), lambda dt: [torch.full((4,), 2.0, dtype=dt)],
         dtypes=F, grad=False, name="histogram constant input")
register("histogram.bin_ct_out", lambda x: _h(torch.histogram(x, 5, out=(torch.empty(0, dtype=x.dtype, device=x.device),
                                                                         torch.empty(0, dtype=x.dtype, device=x.device)))),
         lambda dt: [pts(dt)], dtypes=F, grad=False, name="histogram out")
edges = lambda dt: torch.tensor([-2.0, -0.5, 0.0, 1.5, 2.5], dtype=dt)  # noqa: E731
register("histogram.bins_tensor", lambda x, b, w: _h(torch.histogram(x, b, weight=w, density=True)),
         lambda dt: [pts(dt), edges(dt), make((30,), dt, low=0, high=1, seed=2)], dtypes=F, grad=False)
register("histogram.bins_tensor_out",
         lambda x, b: _h(torch.histogram(x, b, out=(torch.empty(0, dtype=x.dtype, device=x.device),
                                                    torch.empty(0, dtype=x.dtype, device=x.device)))),
         lambda dt: [pts(dt), edges(dt)], dtypes=F, grad=False)
register("_histogramdd_bin_edges _histogramdd_from_bin_cts", lambda x: _h(torch.histogramdd(x, [3, 4])),
         lambda dt: [pts(dt).view(10, 3)[:, :2]], dtypes=F, grad=False, name="histogramdd bin counts")
register("_histogramdd_bin_edges _histogramdd_from_bin_cts",
         lambda x, w: _h(torch.histogramdd(x, [2, 3, 2], range=[-2.0, 2.0, -3.0, 3.0, 0.0, 1.0], weight=w, density=True)),
         lambda dt: [pts(dt).view(2, 5, 3), make((2, 5), dt, low=0, high=1, seed=3)], dtypes=F, grad=False,
         name="histogramdd range weight density")
register("_histogramdd_from_bin_cts.out",
         lambda x: torch.ops.aten._histogramdd_from_bin_cts.out(x, [3, 2], out=torch.empty(0, dtype=x.dtype,
                                                                                          device=x.device)),
         lambda dt: [pts(dt).view(15, 2)], dtypes=F, grad=False)
register("_histogramdd_from_bin_tensors", lambda x, a, b: _h(torch.histogramdd(x, [a, b], density=True)),
         lambda dt: [pts(dt).view(15, 2), edges(dt), edges(dt)[1:]], dtypes=F, grad=False)
register("_histogramdd_from_bin_tensors.out",
         lambda x, a: torch.ops.aten._histogramdd_from_bin_tensors.out(x, [a], out=torch.empty(0, dtype=x.dtype,
                                                                                               device=x.device)),
         lambda dt: [pts(dt).view(30, 1), edges(dt)], dtypes=F, grad=False)
