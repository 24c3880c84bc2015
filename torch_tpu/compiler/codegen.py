"""Inductor's code generation for device "tpu": C++ loop kernels (CppScheduling, the CPU
backend's) launched on the tpu stream, under a Python wrapper that allocates on the graph's
chip. Imported on first use (registration: torch_tpu/compiler/__init__.py)."""
from torch._inductor.codegen.wrapper import PythonWrapperCodegen
from torch._inductor.virtualized import V

_PYBINDING = "async_compile.cpp_pybinding("


class TpuWrapperCodegen(PythonWrapperCodegen):
    """Python wrapper of a tpu graph: kernels compiled by TpuAsyncCompile, launched on the
    stream; buffers allocated on the graph's chip (the device index included)."""

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            return PythonWrapperCodegen.create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures)
        return TpuWrapperCodegen()

    def write_header(self):
        super().write_header()
        self.imports.writeline("from torch_tpu.compiler.launch import TpuAsyncCompile")
        self.header.writeline("async_compile = TpuAsyncCompile()")

    def define_kernel(self, kernel_name, kernel_body, metadata=None, gpu=True, cpp_definition=None):
        if not gpu and kernel_body.startswith(_PYBINDING):
            kernel_body = f"async_compile.tpu_kernel({kernel_name!r}, " + kernel_body[len(_PYBINDING):]
        super().define_kernel(kernel_name, kernel_body, metadata, gpu, cpp_definition)

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, **kwargs):
        device = device or V.graph.get_current_device_or_throw()
        if not triton and device.type == "tpu":  # a C++ kernel: a TpuKernel, called like a function
            self.writeline(self.wrap_kernel_call(kernel_name, call_args))
            return
        super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)

    def make_allocation(self, name, device, dtype, shape, stride, allocation_shape=None, is_pinned=False):
        line = super().make_allocation(name, device, dtype, shape, stride, allocation_shape, is_pinned)
        if device.type == "tpu" and device.index is not None:
            line = line.replace("device='tpu'", f"device='tpu:{device.index}'")
        return line
