// The tpu_dist process-group backend: c10d's Backend interface over the runtime's collectives
// (runtime/src/collective.c). Only what c10d's C++ API demands lives here: rendezvous of the
// group's segment through the store, tensors to buffers, completed Work objects. Collectives run
// on the calling thread once the tensors' stream has finished writing them.
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "Runtime.h"

namespace torch_tpu {
namespace {

constexpr const char* kBackendName = "tpu_dist";

// A collective's failure: the runtime's ValueErrors stay ValueErrors; a broken group, a dead or
// silent peer or mismatched calls are torch.distributed.DistBackendError (a RuntimeError).
void check_comm(tpurt_status s) {
  if (s == TPURT_ERR_RUNTIME) TORCH_CHECK_WITH(DistBackendError, false, tpurt_last_error());
  check(s);
}

// Work that is complete when returned: its future holds the output tensors (DDP's reducer reads them).
class TpuWork : public c10d::Work {
 public:
  TpuWork(int rank, c10d::OpType op, std::vector<at::Tensor> outputs)
      : Work(rank, op), outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
    future_->markCompleted(c10::IValue(outputs_));
    finish();
  }
  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  bool wait(std::chrono::milliseconds) override { return true; }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

c10::intrusive_ptr<c10d::Work> done(int rank, c10d::OpType op, std::vector<at::Tensor> outputs = {}) {
  return c10::make_intrusive<TpuWork>(rank, op, std::move(outputs));
}

// Host machine identity: ranks of one group must share memory.
std::string host_id() {
  char name[256] = "";
  gethostname(name, sizeof name - 1);
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(boot, id);
  return std::string(name) + "/" + id;
}

// A tensor's data once its stream finished writing it; tpu and CPU tensors both live in host memory.
void* ready_data(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().type() == kTpu || t.device().is_cpu(), "tpu_dist: ", what, " must be a tpu (or CPU) tensor, got ",
              t.device());
  TORCH_CHECK(t.layout() == c10::kStrided, "tpu_dist: ", what, " must be a dense tensor, got ", t.layout());
  TORCH_CHECK(t.is_non_overlapping_and_dense(), "tpu_dist: ", what,
              " must be contiguous (or dense in some memory format); call .contiguous() first");
  if (t.device().type() == kTpu) check(tpurt_stream_synchronize(current_stream(t.device().index())));
  return t.data_ptr();
}

tpurt_dtype dtype_of(const at::Tensor& t) {
  int d = to_tpurt_dtype(t.scalar_type());
  TORCH_CHECK_VALUE(d >= 0, "tpu_dist: dtype ", t.scalar_type(), " is not supported");
  return static_cast<tpurt_dtype>(d);
}

// The runtime's op and PREMUL_SUM's factor.
std::pair<tpurt_reduce_op, double> reduce_op(const c10d::ReduceOp& op) {
  TORCH_CHECK_VALUE(op.op_ <= c10d::ReduceOp::PREMUL_SUM, "tpu_dist: unknown reduce op");
  double scale = 1.0;
  if (op.op_ == c10d::ReduceOp::PREMUL_SUM) {
    auto* s = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
    TORCH_CHECK_VALUE(s, "tpu_dist: PREMUL_SUM without its factor");
    scale = s->tensor_factor.defined() ? s->tensor_factor.cpu().item<double>() : s->double_factor;
  }
  return {static_cast<tpurt_reduce_op>(op.op_), scale};
}

void check_same(const at::Tensor& a, const at::Tensor& b, const char* what) {
  TORCH_CHECK_VALUE(a.scalar_type() == b.scalar_type(), "tpu_dist: ", what, ": dtypes differ (", a.scalar_type(),
                    " and ", b.scalar_type(), ")");
}

int64_t nbytes(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

// One buffer holding a list of same-sized tensors, in order (or the list's data when it already is one).
at::Tensor flat_like(const std::vector<at::Tensor>& list, const at::Tensor& like) {
  return at::empty({static_cast<int64_t>(list.size()) * like.numel()}, like.options());
}

class ProcessGroupTpu : public c10d::Backend {
 public:
  ProcessGroupTpu(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, double timeout_s)
      : Backend(rank, size), timeout_s_(timeout_s) {
    store->set("tpu_dist/host/" + std::to_string(rank), host_id());
    std::string mine = host_id();
    for (int r = 0; r < size; r++) {
      auto other = store->get("tpu_dist/host/" + std::to_string(r));
      TORCH_CHECK_NOT_IMPLEMENTED(std::string(other.begin(), other.end()) == mine,
                                  "tpu_dist: rank ", r, " runs on another host; collectives across hosts (the "
                                  "inter-host hop through Gloo) are not implemented yet: use one host, or "
                                  "init_process_group('gloo') for multi-host CPU runs");
    }
    char name[64] = "";
    if (rank == 0) {
      check_comm(tpurt_comm_create(size, name, sizeof name));
      store->set("tpu_dist/segment", std::string(name));
    } else {
      auto v = store->get("tpu_dist/segment");
      std::string s(v.begin(), v.end());
      snprintf(name, sizeof name, "%s", s.c_str());
    }
    std::string label = "tpu_dist (rank " + std::to_string(rank) + " of " + std::to_string(size) + ")";
    check_comm(tpurt_comm_open(name, rank, size, timeout_s, label.c_str(), &comm_));
    // rank 0 unlinks the segment once every rank has it mapped: nothing is left however the job ends
    store->add("tpu_dist/opened", 1);
    if (rank == 0) {
      auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
      while (store->add("tpu_dist/opened", 0) < size) {
        if (std::chrono::steady_clock::now() > deadline) {
          tpurt_comm_unlink(name);
          TORCH_CHECK_WITH(DistBackendError, false, "tpu_dist: not every rank opened the group within ", timeout_s, " s");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      check_comm(tpurt_comm_unlink(name));
    }
  }
  ~ProcessGroupTpu() override { tpurt_comm_destroy(comm_); }

  const std::string getBackendName() const override { return kBackendName; }
  bool supportsCoalescing() const override { return true; }
  void setTimeout(std::chrono::milliseconds timeout) override {
    timeout_s_ = timeout.count() / 1000.0;
    tpurt_comm_set_timeout(comm_, timeout_s_);
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override {
    for (auto& t : tensors) check_comm(tpurt_broadcast(comm_, ready_data(t, "broadcast tensor"), nbytes(t), opts.rootRank));
    return done(rank_, c10d::OpType::BROADCAST, tensors);
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override {
    auto [op, scale] = reduce_op(opts.reduceOp);
    for (auto& t : tensors) {
      void* p = ready_data(t, "all_reduce tensor");
      check_comm(tpurt_all_reduce(comm_, p, p, t.numel(), dtype_of(t), op, scale));
    }
    return done(rank_, c10d::OpType::ALLREDUCE, tensors);
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override {
    return allreduce(tensors, opts);
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override {
    auto [op, scale] = reduce_op(opts.reduceOp);
    for (auto& t : tensors) {
      void* p = ready_data(t, "reduce tensor");
      check_comm(tpurt_reduce(comm_, p, p, t.numel(), dtype_of(t), op, scale, static_cast<int>(opts.rootRank)));
    }
    return done(rank_, c10d::OpType::REDUCE, tensors);
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& out, at::Tensor& in, const c10d::AllgatherOptions&) override {
    check_same(out, in, "all_gather_into_tensor");
    TORCH_CHECK_VALUE(out.numel() == in.numel() * size_, "tpu_dist: all_gather_into_tensor: output has ", out.numel(),
                      " elements, expected ", in.numel() * size_, " (input size x world size)");
    check_comm(tpurt_all_gather(comm_, ready_data(in, "input"), ready_data(out, "output"), nbytes(in)));
    return done(rank_, c10d::OpType::_ALLGATHER_BASE, {out});
  }

  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outs, std::vector<at::Tensor>& ins,
                                                                 const c10d::AllgatherOptions& opts) override {
    TORCH_CHECK_VALUE(outs.size() == ins.size(), "tpu_dist: as many outputs as inputs");
    for (size_t i = 0; i < ins.size(); i++) _allgather_base(outs[i], ins[i], opts);
    return done(rank_, c10d::OpType::COALESCED, outs);
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outs, std::vector<at::Tensor>& ins,
                                           const c10d::AllgatherOptions& opts) override {
    TORCH_CHECK_VALUE(outs.size() == ins.size(), "tpu_dist: all_gather: one output list per input");
    std::vector<at::Tensor> results;
    for (size_t i = 0; i < ins.size(); i++) {
      TORCH_CHECK_VALUE(static_cast<int>(outs[i].size()) == size_, "tpu_dist: all_gather: output list has ",
                        outs[i].size(), " tensors, expected the world size ", size_);
      for (auto& o : outs[i]) {
        check_same(o, ins[i], "all_gather");
        TORCH_CHECK_VALUE(o.numel() == ins[i].numel(), "tpu_dist: all_gather: output tensors must match the input's size");
      }
      at::Tensor in = ins[i].contiguous(), flat = flat_like(outs[i], in);
      _allgather_base(flat, in, opts);
      for (int r = 0; r < size_; r++) outs[i][r].copy_(flat.narrow(0, r * in.numel(), in.numel()).view(outs[i][r].sizes()));
      results.insert(results.end(), outs[i].begin(), outs[i].end());
    }
    return done(rank_, c10d::OpType::ALLGATHER, results);
  }

  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outs, std::vector<at::Tensor>& ins,
                                                     const c10d::AllgatherOptions& opts) override {
    return allgather(outs, ins, opts);
  }

  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outs, std::vector<at::Tensor>& ins,
                                        const c10d::GatherOptions& opts) override {
    TORCH_CHECK_VALUE(ins.size() == 1, "tpu_dist: gather takes one input tensor");
    bool root = rank_ == opts.rootRank;
    at::Tensor in = ins[0].contiguous(), flat;
    if (root) {
      TORCH_CHECK_VALUE(outs.size() == 1 && static_cast<int>(outs[0].size()) == size_,
                        "tpu_dist: gather: the root needs one output tensor per rank");
      flat = flat_like(outs[0], in);
    }
    check_comm(tpurt_gather(comm_, ready_data(in, "gather input"), root ? ready_data(flat, "output") : nullptr, nbytes(in),
                            static_cast<int>(opts.rootRank)));
    if (root)
      for (int r = 0; r < size_; r++) outs[0][r].copy_(flat.narrow(0, r * in.numel(), in.numel()).view(outs[0][r].sizes()));
    return done(rank_, c10d::OpType::GATHER, root ? outs[0] : std::vector<at::Tensor>{});
  }

  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outs, std::vector<std::vector<at::Tensor>>& ins,
                                         const c10d::ScatterOptions& opts) override {
    TORCH_CHECK_VALUE(outs.size() == 1, "tpu_dist: scatter takes one output tensor");
    bool root = rank_ == opts.rootRank;
    at::Tensor flat;
    if (root) {
      TORCH_CHECK_VALUE(ins.size() == 1 && static_cast<int>(ins[0].size()) == size_,
                        "tpu_dist: scatter: the root needs one input tensor per rank");
      std::vector<at::Tensor> parts;
      for (auto& t : ins[0]) parts.push_back(t.reshape({-1}));
      flat = at::cat(parts);
    }
    at::Tensor out = outs[0].is_contiguous() ? outs[0] : at::empty_like(outs[0], at::MemoryFormat::Contiguous);
    check_comm(tpurt_scatter(comm_, root ? ready_data(flat, "scatter input") : nullptr, ready_data(out, "output"),
                             nbytes(out), static_cast<int>(opts.rootRank)));
    if (!out.is_same(outs[0])) outs[0].copy_(out);
    return done(rank_, c10d::OpType::SCATTER, outs);
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& out, at::Tensor& in,
                                                      const c10d::ReduceScatterOptions& opts) override {
    check_same(out, in, "reduce_scatter_tensor");
    TORCH_CHECK_VALUE(in.numel() == out.numel() * size_, "tpu_dist: reduce_scatter_tensor: input has ", in.numel(),
                      " elements, expected ", out.numel() * size_, " (output size x world size)");
    auto [op, scale] = reduce_op(opts.reduceOp);
    check_comm(tpurt_reduce_scatter(comm_, ready_data(in, "input"), ready_data(out, "output"), out.numel(), dtype_of(out),
                                    op, scale));
    return done(rank_, c10d::OpType::_REDUCE_SCATTER_BASE, {out});
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outs, std::vector<at::Tensor>& ins,
                                                                 const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK_VALUE(outs.size() == ins.size(), "tpu_dist: as many outputs as inputs");
    for (size_t i = 0; i < ins.size(); i++) _reduce_scatter_base(outs[i], ins[i], opts);
    return done(rank_, c10d::OpType::COALESCED, outs);
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outs, std::vector<std::vector<at::Tensor>>& ins,
                                                const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK_VALUE(outs.size() == 1 && ins.size() == 1 && static_cast<int>(ins[0].size()) == size_,
                      "tpu_dist: reduce_scatter takes one output and one input tensor per rank");
    std::vector<at::Tensor> parts;
    for (auto& t : ins[0]) parts.push_back(t.reshape({-1}));
    at::Tensor flat = at::cat(parts);
    at::Tensor out = outs[0].is_contiguous() ? outs[0] : at::empty_like(outs[0], at::MemoryFormat::Contiguous);
    _reduce_scatter_base(out, flat, opts);
    if (!out.is_same(outs[0])) outs[0].copy_(out);
    return done(rank_, c10d::OpType::REDUCE_SCATTER, outs);
  }

  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& out, at::Tensor& in, std::vector<int64_t>& out_splits,
                                               std::vector<int64_t>& in_splits, const c10d::AllToAllOptions&) override {
    check_same(out, in, "all_to_all_single");
    std::vector<int64_t> sb, so, rb, ro;
    rows_to_bytes(in, in_splits, "input", &sb, &so);
    rows_to_bytes(out, out_splits, "output", &rb, &ro);
    check_comm(tpurt_all_to_all(comm_, ready_data(in, "input"), sb.data(), so.data(), ready_data(out, "output"), rb.data(),
                                ro.data()));
    return done(rank_, c10d::OpType::ALLTOALL_BASE, {out});
  }

  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outs, std::vector<at::Tensor>& ins,
                                          const c10d::AllToAllOptions&) override {
    TORCH_CHECK_VALUE(static_cast<int>(outs.size()) == size_ && static_cast<int>(ins.size()) == size_,
                      "tpu_dist: all_to_all takes one input and one output tensor per rank");
    std::vector<at::Tensor> parts;
    std::vector<int64_t> sb, so, rb, ro;
    int64_t at_in = 0, at_out = 0;
    for (int r = 0; r < size_; r++) {
      check_same(outs[r], ins[0], "all_to_all");
      parts.push_back(ins[r].reshape({-1}));
      sb.push_back(nbytes(ins[r])), so.push_back(at_in), at_in += nbytes(ins[r]);
      rb.push_back(nbytes(outs[r])), ro.push_back(at_out), at_out += nbytes(outs[r]);
    }
    at::Tensor flat_in = at::cat(parts), flat_out = at::empty({at_out / std::max<int64_t>(1, ins[0].element_size())},
                                                             flat_in.options());
    check_comm(tpurt_all_to_all(comm_, ready_data(flat_in, "input"), sb.data(), so.data(), ready_data(flat_out, "output"),
                                rb.data(), ro.data()));
    int64_t at = 0;
    for (int r = 0; r < size_; r++) {
      outs[r].copy_(flat_out.narrow(0, at, outs[r].numel()).view(outs[r].sizes()));
      at += outs[r].numel();
    }
    return done(rank_, c10d::OpType::ALLTOALL, outs);
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions&) override {
    check_comm(tpurt_barrier(comm_));
    return done(rank_, c10d::OpType::BARRIER);
  }

  // Point-to-point: alone, a send or recv runs at once; between startCoalescing and endCoalescing
  // (batch_isend_irecv) they wait and run together, so ranks exchanging both ways do not block.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    return p2p(tensors, true, dst, tag);
  }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    return p2p(tensors, false, src, tag);
  }
  void startCoalescing() override {
    coalescing_ = true;
    pending_.clear();
    pending_tensors_.clear();
  }
  c10::intrusive_ptr<c10d::Work> endCoalescing() override {
    coalescing_ = false;
    auto tensors = std::move(pending_tensors_);
    auto ops = std::move(pending_);
    check_comm(tpurt_p2p_run(comm_, ops.data(), static_cast<int>(ops.size())));
    return done(rank_, c10d::OpType::COALESCED, tensors);
  }

 private:
  c10::intrusive_ptr<c10d::Work> p2p(std::vector<at::Tensor>& tensors, bool is_send, int peer, int tag) {
    TORCH_CHECK_VALUE(tensors.size() == 1, "tpu_dist: send/recv take one tensor");
    at::Tensor& t = tensors[0];
    tpurt_p2p op{is_send ? 1 : 0, peer, tag, ready_data(t, is_send ? "send tensor" : "recv tensor"), nbytes(t)};
    if (coalescing_) {
      pending_.push_back(op);
      pending_tensors_.push_back(t);
      return done(rank_, is_send ? c10d::OpType::SEND : c10d::OpType::RECV, {t});
    }
    check_comm(tpurt_p2p_run(comm_, &op, 1));
    return done(rank_, is_send ? c10d::OpType::SEND : c10d::OpType::RECV, {t});
  }

  // all_to_all_single's splits (rows of dim 0 per rank; empty: equal) as byte counts and offsets
  void rows_to_bytes(const at::Tensor& t, const std::vector<int64_t>& splits, const char* what, std::vector<int64_t>* bytes,
                     std::vector<int64_t>* offsets) {
    int64_t rows = t.dim() ? t.size(0) : 1, row_bytes = rows ? nbytes(t) / rows : 0, at = 0;
    if (splits.empty()) {
      TORCH_CHECK_VALUE(rows % size_ == 0, "tpu_dist: all_to_all_single: ", what, "'s first dimension (", rows,
                        ") must divide evenly by the world size ", size_, " without split sizes");
    } else {
      TORCH_CHECK_VALUE(static_cast<int>(splits.size()) == size_, "tpu_dist: all_to_all_single: ", what, " split sizes: ",
                        splits.size(), " given for ", size_, " ranks");
      int64_t sum = 0;
      for (auto s : splits) sum += s;
      TORCH_CHECK_VALUE(sum == rows, "tpu_dist: all_to_all_single: ", what, " split sizes add up to ", sum, ", not ", rows);
    }
    for (int r = 0; r < size_; r++) {
      int64_t n = (splits.empty() ? rows / size_ : splits[r]) * row_bytes;
      bytes->push_back(n);
      offsets->push_back(at);
      at += n;
    }
  }

  tpurt_comm* comm_ = nullptr;
  double timeout_s_;
  bool coalescing_ = false;
  std::vector<tpurt_p2p> pending_;
  std::vector<at::Tensor> pending_tensors_;
};

c10::intrusive_ptr<ProcessGroupTpu> create(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                           const std::chrono::duration<float>& timeout) {
  return c10::make_intrusive<ProcessGroupTpu>(store, rank, size, timeout.count());
}

}  // namespace

void add_distributed(py::module& m) {
  py::class_<ProcessGroupTpu, c10d::Backend, c10::intrusive_ptr<ProcessGroupTpu>>(m, "ProcessGroupTPU");
  m.def("_create_tpu_dist_backend", &create, py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
        py::call_guard<py::gil_scoped_release>());
}

}  // namespace torch_tpu
