// The tpu_dist process-group backend: c10d's Backend interface over the runtime's collectives
// (runtime/src/collective.c). Only what c10d's C++ API demands lives here: rendezvous of the
// group's segment through the store, tensors to buffers, Work objects. A collective is a command
// on the device's communication stream, after the work the issuing stream had queued, so the host
// goes on while it runs (as NCCL's); Work.wait() queues a wait on the caller's current stream that
// also carries the collective's failure there. Debug mode (TPU_LAUNCH_BLOCKING=1) and CPU tensors
// wait on the host. A failed collective breaks the group: every later call raises at once.
// A group whose ranks run on several hosts is hierarchical: the ranks of each host share a segment,
// and only the hosts' first ranks (their leaders) talk across hosts, through Gloo (the inter-host
// hop; torch_tpu/distributed/backend.py decides and makes the Gloo groups). all_reduce, broadcast,
// all_gather, reduce_scatter and barrier run as shared memory within the host, Gloo between the
// leaders, shared memory again, as one command on the communication stream like the rest. The
// collectives that move data between arbitrary pairs of ranks (reduce, gather, scatter,
// all_to_all, send/recv) go through a Gloo group of every rank, on host views of the tensors once
// their devices' queued work ran; the host waits for those.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "Runtime.h"

namespace torch_tpu {
namespace {

constexpr const char* kBackendName = "tpu_dist";
constexpr std::chrono::milliseconds kNoWaitLimit{0};
// Across hosts: the first failure of a hierarchical collective, posted for the other hosts' leaders
constexpr const char* kFailedKey = "tpu_dist/failed";

// A collective's failure: the runtime's ValueErrors stay ValueErrors; a broken group, a dead or
// silent peer or mismatched calls are torch.distributed.DistBackendError (a RuntimeError).
void check_comm(tpurt_status s) {
  if (s == TPURT_ERR_RUNTIME) TORCH_CHECK_WITH(DistBackendError, false, tpurt_last_error());
  check(s);
}

// How a queued collective ended, shared by its command, its Work and the waits queued for it.
struct Outcome {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  tpurt_status status = TPURT_OK;
  std::string message;

  void finish(tpurt_status s) {
    std::lock_guard<std::mutex> g(mu);
    status = s;
    if (s) message = tpurt_last_error();
    done = true;
    cv.notify_all();
  }
  // Whether the collective ran within `limit`.
  bool wait_for(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> g(mu);
    return cv.wait_for(g, limit, [&] { return done; });
  }
  // Blocks until the collective ran; its status, with the message set as the thread's error.
  tpurt_status wait() {
    std::unique_lock<std::mutex> g(mu);
    cv.wait(g, [&] { return done; });
    return status ? tpurt_fail_message(status, message.c_str()) : TPURT_OK;
  }
};

// A collective as a stream command: the call, and the tensors it uses, kept alive until it ran.
struct CommCall {
  std::function<tpurt_status()> fn;
  std::vector<at::Tensor> keep;
  std::shared_ptr<Outcome> outcome;
};
tpurt_status run_call(void* p) {
  auto* c = static_cast<CommCall*>(p);
  tpurt_status s = c->fn();
  c->outcome->finish(s);
  return s;
}
void release_call(void* p) { delete static_cast<CommCall*>(p); }

// A stream command that holds its stream until a collective ran, and fails it if that failed.
tpurt_status wait_outcome(void* p) { return (*static_cast<std::shared_ptr<Outcome>*>(p))->wait(); }
void release_outcome(void* p) { delete static_cast<std::shared_ptr<Outcome>*>(p); }

bool debug_mode() { return tpurt_get_eager_mode() == TPURT_MODE_DEBUG; }

class TpuWork : public c10d::Work {
 public:
  TpuWork(int rank, c10d::OpType op, std::vector<at::Tensor> outputs, std::shared_ptr<Outcome> outcome,
          c10::intrusive_ptr<c10::ivalue::Future> future)
      : Work(rank, op), outputs_(std::move(outputs)), outcome_(std::move(outcome)), future_(std::move(future)) {}
  bool isCompleted() override {
    if (!outcome_) return true;
    std::lock_guard<std::mutex> g(outcome_->mu);
    return outcome_->done;
  }
  bool isSuccess() const override {
    if (!outcome_) return true;
    std::lock_guard<std::mutex> g(outcome_->mu);
    return outcome_->done && !outcome_->status;
  }
  // The host waits for the collective; its failure raises here.
  void synchronize_host() {
    if (outcome_) check_comm(outcome_->wait());
  }
  // The caller's stream waits for the collective (the host does in debug mode, or when the
  // collective already ended: a failure then raises here).
  // With a timeout (work.wait(timeout=...)) the host waits at most that long, and raises after it.
  bool wait(std::chrono::milliseconds timeout) override {
    if (!outcome_) return true;  // a send/recv inside a batch: the batch's Work is the one to wait on
    if (timeout > kNoWaitLimit && !outcome_->wait_for(timeout))
      TORCH_CHECK_WITH(DistBackendError, false, "tpu_dist: ", c10d::opTypeToString(retrieveOpType()), " did not complete within ",
                       timeout.count(), " ms (work.wait's timeout)");
    if (isCompleted() || debug_mode() || tpu_device_ < 0) {
      synchronize_host();
    } else {
      auto* arg = new std::shared_ptr<Outcome>(outcome_);
      check(tpurt_stream_enqueue(current_stream(tpu_device_), wait_outcome, arg, release_outcome, "tpu_dist wait"));
    }
    return true;
  }
  void synchronize() override { wait(std::chrono::milliseconds(0)); }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  const std::shared_ptr<Outcome>& outcome() const { return outcome_; }

  int tpu_device_ = -1;

 private:
  std::vector<at::Tensor> outputs_;
  std::shared_ptr<Outcome> outcome_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// A tensor's data (read by the collective once the issuing stream's earlier work ran); tpu and CPU
// tensors both live in host memory.
void* data_of(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().type() == kTpu || t.device().is_cpu(), "tpu_dist: ", what, " must be a tpu (or CPU) tensor, got ",
              t.device());
  TORCH_CHECK(t.layout() == c10::kStrided, "tpu_dist: ", what, " must be a dense tensor, got ", t.layout());
  TORCH_CHECK(t.is_non_overlapping_and_dense(), "tpu_dist: ", what,
              " must be contiguous (or dense in some memory format); call .contiguous() first");
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

class ProcessGroupTpu : public c10d::Backend {
 public:
  // Across hosts: host_of[r] is the host of rank r, gloo every rank's Gloo group, leaders (on each
  // host's first rank only) the leaders' Gloo group; this host's ranks share a segment.
  ProcessGroupTpu(const c10::intrusive_ptr<c10d::Store>& group_store, int rank, int size, double timeout_s,
                  c10::intrusive_ptr<c10d::Backend> gloo, c10::intrusive_ptr<c10d::Backend> leaders, std::vector<int> host_of)
      : Backend(rank, size), gloo_(std::move(gloo)), leaders_(std::move(leaders)), host_of_(std::move(host_of)), timeout_s_(timeout_s) {
    c10::intrusive_ptr<c10d::Store> store = group_store;
    if (gloo_) {
      store_ = group_store;
      store = c10::make_intrusive<c10d::PrefixStore>("tpu_dist/host" + std::to_string(host_of_.at(rank)), group_store);
      TORCH_CHECK_VALUE(static_cast<int>(host_of_.size()) == size, "tpu_dist: one host per rank");
      for (int r = 0; r < size; r++) {
        if (host_of_[r] == host_of_[rank]) local_of_.push_back(r);
        hosts_ = std::max(hosts_, host_of_[r] + 1);
      }
      rank = static_cast<int>(std::find(local_of_.begin(), local_of_.end(), rank) - local_of_.begin());
      size = static_cast<int>(local_of_.size());
      TORCH_CHECK_VALUE((rank == 0) == leaders_.defined(), "tpu_dist: the leaders' Gloo group belongs to each host's first rank");
      contiguous_ = hosts_ * size == size_;
      for (int r = 0; r < size_; r++) contiguous_ = contiguous_ && host_of_[r] == r / size;
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
    std::string label = "tpu_dist (rank " + std::to_string(rank_) + " of " + std::to_string(size_);
    if (gloo_)  // which host's segment, and this rank's place in it
      label += "; on host " + std::to_string(host_of_[rank_]) + " as rank " + std::to_string(rank) + " of its " + std::to_string(size);
    label += ")";
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
    if (gloo_) {
      if (leaders_) leaders_->setTimeout(std::chrono::milliseconds(static_cast<int64_t>((timeout_s + kPatience) * 1000)));
      tpurt_comm_set_counted(comm_, 0);  // the whole collective is counted once, in hierarchical()
      check_comm(tpurt_comm_set_rank_names(comm_, local_of_.data()));
    }
  }
  ~ProcessGroupTpu() override {
    for (int d : used_devices_) tpurt_stream_synchronize(tpurt_stream_make(d, TPURT_COMM_STREAM_INDEX));
    if (ready_) tpurt_event_destroy(ready_);
    tpurt_comm_destroy(comm_);
  }

  const std::string getBackendName() const override { return kBackendName; }
  bool supportsCoalescing() const override { return true; }
  void setTimeout(std::chrono::milliseconds timeout) override {
    if (gloo_) gloo_->setTimeout(timeout);
    if (leaders_) leaders_->setTimeout(timeout + std::chrono::milliseconds(static_cast<int64_t>(kPatience * 1000)));
    timeout_s_ = timeout.count() / 1000.0;
    tpurt_comm_set_timeout(comm_, timeout_s_);
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override {
    int root = static_cast<int>(opts.rootRank);
    std::vector<Step> steps;
    for (auto& t : tensors) {
      void* p = data_of(t, "broadcast tensor");
      int64_t n = nbytes(t);
      if (gloo_)
        steps.push_back(hierarchical_broadcast(p, n, root));
      else
        steps.push_back([=, this] { return tpurt_broadcast(comm_, p, n, root); });
    }
    return run(c10d::OpType::BROADCAST, tensors, tensors, std::move(steps), "tpu_dist broadcast");
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override {
    return reduce_each(c10d::OpType::ALLREDUCE, tensors, opts.reduceOp, -1);
  }
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override {
    return reduce_each(c10d::OpType::ALLREDUCE_COALESCED, tensors, opts.reduceOp, -1);
  }
  // Across hosts reduce goes through every rank's Gloo group: only the root's tensor may change.
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override {
    if (gloo_) return reduce_through_gloo(c10d::OpType::REDUCE, tensors, opts.reduceOp, static_cast<int>(opts.rootRank));
    return reduce_each(c10d::OpType::REDUCE, tensors, opts.reduceOp, static_cast<int>(opts.rootRank));
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& out, at::Tensor& in, const c10d::AllgatherOptions&) override {
    if (gloo_ && !contiguous_)
      return through_gloo(c10d::OpType::_ALLGATHER_BASE, {TPURT_COMM_ALL_GATHER, nbytes(out)}, {in, out}, {out}, [&] {
        auto o = view(out), i = view(in);
        gloo_->_allgather_base(o, i)->wait();
      });
    return run(c10d::OpType::_ALLGATHER_BASE, {in}, {out}, {gather_step(out, in)}, "tpu_dist all_gather");
  }
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outs, std::vector<at::Tensor>& ins,
                                                                 const c10d::AllgatherOptions&) override {
    if (gloo_ && !contiguous_)
      return through_gloo(c10d::OpType::COALESCED, {TPURT_COMM_ALL_GATHER, bytes_of(outs)}, cat(ins, outs), outs, [&] {
        auto o = views(outs), i = views(ins);
        gloo_->allgather_into_tensor_coalesced(o, i)->wait();
      });
    TORCH_CHECK_VALUE(outs.size() == ins.size(), "tpu_dist: as many outputs as inputs");
    std::vector<Step> steps;
    for (size_t i = 0; i < ins.size(); i++) steps.push_back(gather_step(outs[i], ins[i]));
    return run(c10d::OpType::COALESCED, ins, outs, std::move(steps), "tpu_dist all_gather");
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outs, std::vector<at::Tensor>& ins,
                                           const c10d::AllgatherOptions& opts) override {
    if (gloo_ && !contiguous_)
      return through_gloo(c10d::OpType::ALLGATHER, {TPURT_COMM_ALL_GATHER, bytes_of(flat(outs))}, cat(ins, flat(outs)), flat(outs), [&] {
        auto o = views(outs);
        auto i = views(ins);
        gloo_->allgather(o, i, opts)->wait();
      });
    TORCH_CHECK_VALUE(outs.size() == ins.size(), "tpu_dist: all_gather: one output list per input");
    std::vector<at::Tensor> flats, contiguous_ins, results;
    std::vector<Step> steps;
    for (size_t i = 0; i < ins.size(); i++) {
      TORCH_CHECK_VALUE(static_cast<int>(outs[i].size()) == size_, "tpu_dist: all_gather: output list has ",
                        outs[i].size(), " tensors, expected the world size ", size_);
      for (auto& o : outs[i]) {
        check_same(o, ins[i], "all_gather");
        TORCH_CHECK_VALUE(o.numel() == ins[i].numel(), "tpu_dist: all_gather: output tensors must match the input's size");
      }
      contiguous_ins.push_back(ins[i].contiguous());
      flats.push_back(at::empty({size_ * ins[i].numel()}, ins[i].options()));
      steps.push_back(gather_step(flats.back(), contiguous_ins.back()));
    }
    auto work = run(c10d::OpType::ALLGATHER, contiguous_ins, flats, std::move(steps), "tpu_dist all_gather");
    work->wait(kNoWaitLimit);  // the copies out run on the caller's stream, after the collective
    for (size_t i = 0; i < ins.size(); i++) {
      unflatten(flats[i], outs[i]);
      results.insert(results.end(), outs[i].begin(), outs[i].end());
    }
    return done_after(work, c10d::OpType::ALLGATHER, results);
  }
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outs, std::vector<at::Tensor>& ins,
                                                     const c10d::AllgatherOptions& opts) override {
    return allgather(outs, ins, opts);
  }

  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outs, std::vector<at::Tensor>& ins,
                                        const c10d::GatherOptions& opts) override {
    if (gloo_)
      return through_gloo(c10d::OpType::GATHER, {TPURT_COMM_GATHER, bytes_of(ins)}, cat(ins, flat(outs)), flat(outs), [&] {
        auto o = views(outs);
        auto i = views(ins);
        gloo_->gather(o, i, opts)->wait();
      });
    TORCH_CHECK_VALUE(ins.size() == 1, "tpu_dist: gather takes one input tensor");
    int root = static_cast<int>(opts.rootRank);
    bool is_root = rank_ == root;
    at::Tensor in = ins[0].contiguous(), flat;
    if (is_root) {
      TORCH_CHECK_VALUE(outs.size() == 1 && static_cast<int>(outs[0].size()) == size_,
                        "tpu_dist: gather: the root needs one output tensor per rank");
      for (auto& o : outs[0]) check_same(o, in, "gather");
      flat = at::empty({size_ * in.numel()}, in.options());
    }
    const void* src = data_of(in, "gather input");
    void* dst = is_root ? data_of(flat, "output") : nullptr;
    int64_t n = nbytes(in);
    auto work = run(c10d::OpType::GATHER, {in}, is_root ? std::vector<at::Tensor>{flat} : std::vector<at::Tensor>{},
                    {[=, this] { return tpurt_gather(comm_, src, dst, n, root); }}, "tpu_dist gather");
    if (!is_root) return work;
    work->wait(kNoWaitLimit);
    unflatten(flat, outs[0]);
    return done_after(work, c10d::OpType::GATHER, outs[0]);
  }

  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outs, std::vector<std::vector<at::Tensor>>& ins,
                                         const c10d::ScatterOptions& opts) override {
    if (gloo_)
      return through_gloo(c10d::OpType::SCATTER, {TPURT_COMM_SCATTER, bytes_of(outs)}, cat(outs, flat(ins)), outs, [&] {
        auto o = views(outs);
        auto i = views(ins);
        gloo_->scatter(o, i, opts)->wait();
      });
    TORCH_CHECK_VALUE(outs.size() == 1, "tpu_dist: scatter takes one output tensor");
    int root = static_cast<int>(opts.rootRank);
    at::Tensor flat;
    if (rank_ == root) {
      TORCH_CHECK_VALUE(ins.size() == 1 && static_cast<int>(ins[0].size()) == size_,
                        "tpu_dist: scatter: the root needs one input tensor per rank");
      flat = flatten(ins[0], outs[0]);
    }
    at::Tensor out = dense(outs[0]);
    const void* src = flat.defined() ? data_of(flat, "scatter input") : nullptr;
    void* dst = data_of(out, "output");
    int64_t n = nbytes(out);
    auto work = run(c10d::OpType::SCATTER, flat.defined() ? std::vector<at::Tensor>{flat} : std::vector<at::Tensor>{}, {out},
                    {[=, this] { return tpurt_scatter(comm_, src, dst, n, root); }}, "tpu_dist scatter");
    return copy_back(work, out, outs[0], c10d::OpType::SCATTER);
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& out, at::Tensor& in,
                                                      const c10d::ReduceScatterOptions& opts) override {
    if (gloo_ && !contiguous_) {
      std::vector<at::Tensor> o{out}, i{in};
      return reduce_scatter_through_gloo(c10d::OpType::_REDUCE_SCATTER_BASE, o, i, opts);
    }
    return run(c10d::OpType::_REDUCE_SCATTER_BASE, {in}, {out}, {scatter_step(out, in, opts.reduceOp)},
               "tpu_dist reduce_scatter");
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outs, std::vector<at::Tensor>& ins,
                                                                 const c10d::ReduceScatterOptions& opts) override {
    if (gloo_ && !contiguous_) return reduce_scatter_through_gloo(c10d::OpType::COALESCED, outs, ins, opts);
    TORCH_CHECK_VALUE(outs.size() == ins.size(), "tpu_dist: as many outputs as inputs");
    std::vector<Step> steps;
    for (size_t i = 0; i < ins.size(); i++) steps.push_back(scatter_step(outs[i], ins[i], opts.reduceOp));
    return run(c10d::OpType::COALESCED, ins, outs, std::move(steps), "tpu_dist reduce_scatter");
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outs, std::vector<std::vector<at::Tensor>>& ins,
                                                const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK_VALUE(outs.size() == 1 && ins.size() == 1 && static_cast<int>(ins[0].size()) == size_,
                      "tpu_dist: reduce_scatter takes one output and one input tensor per rank");
    if (gloo_ && !contiguous_) {
      std::vector<at::Tensor> i{flatten(ins[0], outs[0])};
      return reduce_scatter_through_gloo(c10d::OpType::REDUCE_SCATTER, outs, i, opts);
    }
    at::Tensor flat = flatten(ins[0], outs[0]), out = dense(outs[0]);
    auto work = run(c10d::OpType::REDUCE_SCATTER, {flat}, {out}, {scatter_step(out, flat, opts.reduceOp)},
                    "tpu_dist reduce_scatter");
    return copy_back(work, out, outs[0], c10d::OpType::REDUCE_SCATTER);
  }

  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& out, at::Tensor& in, std::vector<int64_t>& out_splits,
                                               std::vector<int64_t>& in_splits, const c10d::AllToAllOptions& opts) override {
    if (gloo_)
      return through_gloo(c10d::OpType::ALLTOALL_BASE, {TPURT_COMM_ALL_TO_ALL, nbytes(in)}, {in, out}, {out}, [&] {
        auto o = view(out), i = view(in);
        gloo_->alltoall_base(o, i, out_splits, in_splits, opts)->wait();
      });
    check_same(out, in, "all_to_all_single");
    std::vector<int64_t> sb, so, rb, ro;
    rows_to_bytes(in, in_splits, "input", &sb, &so);
    rows_to_bytes(out, out_splits, "output", &rb, &ro);
    const void* src = data_of(in, "input");
    void* dst = data_of(out, "output");
    return run(c10d::OpType::ALLTOALL_BASE, {in}, {out},
               {[=, this] { return tpurt_all_to_all(comm_, src, sb.data(), so.data(), dst, rb.data(), ro.data()); }},
               "tpu_dist all_to_all");
  }

  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outs, std::vector<at::Tensor>& ins,
                                          const c10d::AllToAllOptions& opts) override {
    if (gloo_)  // Gloo's list all_to_all wants equal sizes: one all_to_all_single over the lists laid end to end
      return through_gloo(c10d::OpType::ALLTOALL, {TPURT_COMM_ALL_TO_ALL, bytes_of(ins)}, cat(ins, outs), outs, [&] {
        std::vector<at::Tensor> parts;
        std::vector<int64_t> in_splits, out_splits;
        for (auto& t : ins) parts.push_back(view(t).reshape({-1})), in_splits.push_back(t.numel());
        for (auto& t : outs) out_splits.push_back(t.numel());
        at::Tensor flat_in = at::cat(parts);
        at::Tensor flat_out = at::empty({std::accumulate(out_splits.begin(), out_splits.end(), int64_t{0})}, flat_in.options());
        gloo_->alltoall_base(flat_out, flat_in, out_splits, in_splits, opts)->wait();
        int64_t at = 0;
        for (auto& t : outs) view(t).copy_(flat_out.narrow(0, at, t.numel()).view(t.sizes())), at += t.numel();
      });
    TORCH_CHECK_VALUE(static_cast<int>(outs.size()) == size_ && static_cast<int>(ins.size()) == size_,
                      "tpu_dist: all_to_all takes one input and one output tensor per rank");
    std::vector<at::Tensor> parts;
    std::vector<int64_t> sb, so, rb, ro;
    int64_t at_in = 0, at_out = 0;
    for (int r = 0; r < size_; r++) {
      check_same(outs[r], ins[0], "all_to_all");
      check_same(ins[r], ins[0], "all_to_all");
      parts.push_back(ins[r].reshape({-1}));
      sb.push_back(nbytes(ins[r])), so.push_back(at_in), at_in += nbytes(ins[r]);
      rb.push_back(nbytes(outs[r])), ro.push_back(at_out), at_out += nbytes(outs[r]);
    }
    at::Tensor flat_in = at::cat(parts);
    at::Tensor flat_out = at::empty({at_out / static_cast<int64_t>(flat_in.element_size())}, flat_in.options());
    const void* src = data_of(flat_in, "input");
    void* dst = data_of(flat_out, "output");
    auto work = run(c10d::OpType::ALLTOALL, {flat_in}, {flat_out},
                    {[=, this] { return tpurt_all_to_all(comm_, src, sb.data(), so.data(), dst, rb.data(), ro.data()); }},
                    "tpu_dist all_to_all");
    work->wait(kNoWaitLimit);
    int64_t at = 0;
    for (int r = 0; r < size_; r++) {
      outs[r].copy_(flat_out.narrow(0, at, outs[r].numel()).view(outs[r].sizes()));
      at += outs[r].numel();
    }
    return done_after(work, c10d::OpType::ALLTOALL, outs);
  }

  // The host waits: a barrier orders the processes, not device work.
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    Step step = [this] { return tpurt_barrier(comm_); };
    if (gloo_)
      step = hierarchical({TPURT_COMM_BARRIER}, 0, step, [] {}, step);  // the leaders' agree() is their barrier
    auto work = run(c10d::OpType::BARRIER, {}, {}, {step}, "tpu_dist barrier");
    work->synchronize_host();
    return work;
  }

  // Point-to-point: alone, a send or recv is one command; between startCoalescing and endCoalescing
  // (batch_isend_irecv) they are one command that progresses them together, so ranks exchanging both
  // ways do not wait on each other.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    return p2p(tensors, true, dst, tag);
  }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    return p2p(tensors, false, src, tag);
  }
  void startCoalescing() override {
    pending_gloo_.clear();
    coalescing_ = true;
    pending_.clear();
    pending_tensors_.clear();
  }
  c10::intrusive_ptr<c10d::Work> endCoalescing() override {
    coalescing_ = false;
    if (gloo_)
      return through_gloo(c10d::OpType::COALESCED, {TPURT_COMM_SEND_RECV, bytes_of(pending_tensors_)}, {}, pending_tensors_, [&] {
        for (auto& w : pending_gloo_) w->wait();
        pending_gloo_.clear();
      });
    auto ops = std::make_shared<std::vector<tpurt_p2p>>(std::move(pending_));
    auto tensors = std::move(pending_tensors_);
    return run(c10d::OpType::COALESCED, tensors, tensors,
               {[ops, this] { return tpurt_p2p_run(comm_, ops->data(), static_cast<int>(ops->size())); }}, "tpu_dist send/recv");
  }

 private:
  using Step = std::function<tpurt_status()>;

  // Queues the steps as one command on the communication stream of the tensors' device, after the
  // issuing stream's earlier work. inputs/outputs stay alive until it ran; the Work's future holds outputs.
  c10::intrusive_ptr<TpuWork> run(c10d::OpType op, std::vector<at::Tensor> inputs, std::vector<at::Tensor> outputs,
                                  std::vector<Step> steps, const char* what) {
    throw_if_broken();
    int dev = -1;
    for (auto* list : {&inputs, &outputs})
      for (auto& t : *list)
        if (t.defined() && t.device().type() == kTpu) dev = t.device().index();
    int device = dev >= 0 ? dev : tpurt_device_get();
    int32_t comm = tpurt_stream_make(device, TPURT_COMM_STREAM_INDEX);
    if (dev >= 0) {
      if (!ready_) check(tpurt_event_create(0, &ready_));
      check(tpurt_event_record(ready_, current_stream(dev)));
      check(tpurt_event_wait(ready_, comm));
    }
    auto outcome = std::make_shared<Outcome>();
    auto* call = new CommCall{nullptr, inputs, outcome};
    call->keep.insert(call->keep.end(), outputs.begin(), outputs.end());
    auto broken = broken_;
    call->fn = [steps = std::move(steps), broken] {
      for (auto& step : steps) {
        tpurt_status s = step();
        if (s == TPURT_ERR_RUNTIME) broken->finish(s);  // the group is gone: later calls raise on the host
        if (s) return s;
      }
      return TPURT_OK;
    };
    check(tpurt_stream_enqueue(comm, run_call, call, release_call, what));
    used_devices_.insert(device);
    auto type = c10::ListType::create(c10::TensorType::get());
    c10::intrusive_ptr<c10::ivalue::Future> future;
    if (dev >= 0) {
      // complete on the communication stream: waiting on the future orders the waiter's stream after it
      future = c10::make_intrusive<c10::ivalue::Future>(type, std::vector<c10::Device>{c10::Device(kTpu, dev)});
      c10::StreamGuard on_comm(c10::Stream(c10::Stream::UNSAFE, c10::Device(kTpu, dev), TPURT_COMM_STREAM_INDEX));
      future->markCompleted(c10::IValue(outputs));
    } else {
      future = c10::make_intrusive<c10::ivalue::Future>(type);
    }
    auto work = c10::make_intrusive<TpuWork>(rank_, op, outputs, outcome, future);
    work->tpu_device_ = dev;
    if (dev < 0 || debug_mode()) work->synchronize_host();
    if (dev < 0) future->markCompleted(c10::IValue(outputs));
    return work;
  }

  void throw_if_broken() {
    std::lock_guard<std::mutex> g(broken_->mu);
    if (broken_->done) TORCH_CHECK_WITH(DistBackendError, false, broken_->message);
  }

  c10::intrusive_ptr<c10d::Work> reduce_each(c10d::OpType kind, std::vector<at::Tensor>& tensors, const c10d::ReduceOp& rop,
                                             int root) {
    auto [op, scale] = reduce_op(rop);
    std::vector<Step> steps;
    for (auto& t : tensors) {
      tpurt_dtype dt = dtype_of(t);
      check(tpurt_check_reduction(dt, op));  // here, not later on the stream: the caller gets the ValueError
      void* p = data_of(t, "reduced tensor");
      int64_t n = t.numel();
      if (gloo_)
        steps.push_back(hierarchical_all_reduce(t, rop));
      else if (root < 0)
        steps.push_back([=, this] { return tpurt_all_reduce(comm_, p, p, n, dt, op, scale); });
      else
        steps.push_back([=, this] { return tpurt_reduce(comm_, p, p, n, dt, op, scale, root); });
    }
    return run(kind, tensors, tensors, std::move(steps), root < 0 ? "tpu_dist all_reduce" : "tpu_dist reduce");
  }

  Step gather_step(const at::Tensor& out, const at::Tensor& in) {
    check_same(out, in, "all_gather_into_tensor");
    TORCH_CHECK_VALUE(out.numel() == in.numel() * size_, "tpu_dist: all_gather_into_tensor: output has ", out.numel(),
                      " elements, expected ", in.numel() * size_, " (input size x world size)");
    const void* src = data_of(in, "input");
    void* dst = data_of(out, "output");
    int64_t n = nbytes(in);
    if (gloo_) return hierarchical_all_gather(src, dst, n);
    return [=, this] { return tpurt_all_gather(comm_, src, dst, n); };
  }

  Step scatter_step(const at::Tensor& out, const at::Tensor& in, const c10d::ReduceOp& rop) {
    check_same(out, in, "reduce_scatter_tensor");
    TORCH_CHECK_VALUE(in.numel() == out.numel() * size_, "tpu_dist: reduce_scatter_tensor: input has ", in.numel(),
                      " elements, expected ", out.numel() * size_, " (output size x world size)");
    auto [op, scale] = reduce_op(rop);
    tpurt_dtype dt = dtype_of(out);
    check(tpurt_check_reduction(dt, op));
    const void* src = data_of(in, "input");
    void* dst = data_of(out, "output");
    int64_t n = out.numel();
    if (gloo_) return hierarchical_reduce_scatter(out, src, dst, n, dt, rop);
    return [=, this] { return tpurt_reduce_scatter(comm_, src, dst, n, dt, op, scale); };
  }

  // One buffer holding a per-rank list of tensors in order (checked against `like`'s dtype).
  at::Tensor flatten(const std::vector<at::Tensor>& list, const at::Tensor& like) {
    std::vector<at::Tensor> parts;
    for (auto& t : list) {
      check_same(t, like, "tensor list");
      parts.push_back(t.reshape({-1}));
    }
    return at::cat(parts);
  }
  void unflatten(const at::Tensor& flat, std::vector<at::Tensor>& outs) {
    int64_t n = flat.numel() / size_;
    for (int r = 0; r < size_; r++) outs[r].copy_(flat.narrow(0, r * n, n).view(outs[r].sizes()));
  }
  static at::Tensor dense(const at::Tensor& t) {
    return t.is_contiguous() ? t : at::empty_like(t, at::MemoryFormat::Contiguous);
  }
  c10::intrusive_ptr<c10d::Work> copy_back(const c10::intrusive_ptr<TpuWork>& work, const at::Tensor& dense_out,
                                           at::Tensor& out, c10d::OpType op) {
    if (dense_out.is_same(out)) return work;
    work->wait(kNoWaitLimit);
    out.copy_(dense_out);
    return done_after(work, op, {out});
  }
  // The Work of a collective whose results were copied on the caller's stream: already ordered there.
  c10::intrusive_ptr<c10d::Work> done_after(const c10::intrusive_ptr<TpuWork>& work, c10d::OpType op,
                                            std::vector<at::Tensor> outputs) {
    auto type = c10::ListType::create(c10::TensorType::get());
    auto future = work->tpu_device_ >= 0
                      ? c10::make_intrusive<c10::ivalue::Future>(type, std::vector<c10::Device>{c10::Device(kTpu, work->tpu_device_)})
                      : c10::make_intrusive<c10::ivalue::Future>(type);
    future->markCompleted(c10::IValue(outputs));
    auto w = c10::make_intrusive<TpuWork>(rank_, op, std::move(outputs), work->outcome(), future);
    w->tpu_device_ = work->tpu_device_;
    return w;
  }

  c10::intrusive_ptr<c10d::Work> p2p(std::vector<at::Tensor>& tensors, bool is_send, int peer, int tag) {
    TORCH_CHECK_VALUE(tensors.size() == 1, "tpu_dist: send/recv take one tensor");
    if (gloo_) return p2p_through_gloo(tensors, is_send, peer, tag);
    at::Tensor& t = tensors[0];
    tpurt_p2p op{is_send ? 1 : 0, peer, tag, data_of(t, is_send ? "send tensor" : "recv tensor"), nbytes(t)};
    if (coalescing_) {  // the batch's Work (endCoalescing) is the one callers wait on
      pending_.push_back(op);
      pending_tensors_.push_back(t);
      return c10::make_intrusive<TpuWork>(rank_, is_send ? c10d::OpType::SEND : c10d::OpType::RECV,
                                          std::vector<at::Tensor>{t}, nullptr, nullptr);
    }
    return run(is_send ? c10d::OpType::SEND : c10d::OpType::RECV, {t}, {t},
               {[op, this] { return tpurt_p2p_run(comm_, &op, 1); }}, is_send ? "tpu_dist send" : "tpu_dist recv");
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

  // ---- across hosts, hierarchical: this host's segment, Gloo between the hosts' leaders, the segment
  bool leader() const { return leaders_.defined(); }
  int local_rank_of(int r) const {
    int k = 0;
    for (int q = 0; q < r; q++) k += host_of_[q] == host_of_[r];
    return k;
  }
  int local_size() const { return static_cast<int>(local_of_.size()); }

  // What a host calls, compared between the hosts' leaders before any data moves: calls that differ
  // between hosts (each host agreeing within) fail on every host instead of hanging in Gloo or
  // mixing data. count: elements for reductions, bytes otherwise; -1: not part of the call.
  struct Call {
    int64_t kind, dtype = -1, count = 0, op = -1, root = -1, seq = 0;
  };
  std::string describe(const Call& c) const {
    std::string d = std::string(tpurt_comm_kind_name(static_cast<int>(c.kind))) + " #" + std::to_string(c.seq) + " (";
    if (c.dtype >= 0) d += std::string(tpurt_dtype_name(static_cast<tpurt_dtype>(c.dtype))) + ", ";
    d += std::to_string(c.count) + (c.dtype >= 0 ? " elements" : " bytes");
    if (c.op >= 0) d += std::string(", op ") + std::to_string(c.op);
    if (c.root >= 0) d += ", root host " + std::to_string(c.root);
    return d + ")";
  }
  std::string host_name(int h) const {
    std::string ranks;
    for (int r = 0; r < size_; r++)
      if (host_of_[r] == h) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    return "host " + std::to_string(h) + " (ranks " + ranks + ")";
  }
  void agree(const Call& mine) {
    constexpr int64_t kFields = sizeof(Call) / sizeof(int64_t);
    at::Tensor all = at::empty({hosts_ * kFields}, at::kLong);
    at::Tensor me = at::empty({kFields}, at::kLong);
    memcpy(me.data_ptr(), &mine, sizeof mine);
    await_leaders(leaders_->_allgather_base(all, me));
    for (int h = 0; h < hosts_; h++) {
      Call theirs;
      memcpy(&theirs, all.data_ptr<int64_t>() + h * kFields, sizeof theirs);
      if (memcmp(&theirs, &mine, sizeof mine))
        throw std::runtime_error("mismatched collectives across hosts: " + host_name(host_of_[rank_]) + " called " +
                                 describe(mine) + " while " + host_name(h) + " called " + describe(theirs));
    }
  }
  // The leaders' step of a hierarchical collective (nothing on the other ranks): the hosts' calls
  // compared, then the call on the leaders' Gloo group. A failure breaks this host's segment too,
  // so the host's other ranks stop waiting for the leader.
  Step on_leaders(Call call_fp, std::function<void()> call) {
    if (!leader()) return [] { return TPURT_OK; };
    return [call_fp, call = std::move(call), this] {
      try {
        agree(call_fp);
        call();
        return TPURT_OK;
      } catch (const std::exception& e) {
        return tpurt_comm_fail(comm_, ("across hosts: " + std::string(e.what())).c_str());
      }
    };
  }
  // Waits for a leaders' Gloo collective. A leader of a host whose ranks failed (a rank killed, say)
  // never joins it, so the wait also watches the store for a failure another host posted.
  void await_leaders(const c10::intrusive_ptr<c10d::Work>& work) {
    struct Done {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
    };
    auto done = std::make_shared<Done>();
    work->getFuture()->addCallback([done](c10::ivalue::Future&) {
      std::lock_guard<std::mutex> g(done->mu);
      done->done = true;
      done->cv.notify_all();
    });
    for (;;) {
      {
        std::unique_lock<std::mutex> g(done->mu);
        if (done->cv.wait_for(g, std::chrono::milliseconds(100), [&] { return done->done; })) break;
      }
      if (store_->check({kFailedKey})) {
        auto v = store_->get(kFailedKey);
        throw std::runtime_error("another host's ranks failed: " + std::string(v.begin(), v.end()));
      }
    }
    work->wait();  // raises the collective's own failure
  }
  // Posts this rank's failure (the thread's error) for the other hosts; the first one stays.
  void post_failure() {
    std::string message = tpurt_last_error();
    try {
      store_->compareSet(kFailedKey, {}, std::vector<uint8_t>(message.begin(), message.end()));
    } catch (const std::exception&) {  // the store is gone too: the other hosts' Gloo notices the job's end
    }
    tpurt_fail_message(TPURT_ERR_RUNTIME, message.c_str());
  }
  // A collective of this host's segment before, the leaders' across hosts, and the segment's after,
  // as one step, counted once as the whole group's collective. A failure names that collective (every
  // rank numbers them alike) and is posted for the other hosts. Only the rank that sees a failure
  // first-hand must time out first: the ranks waiting for their leader after the hop, and the
  // leaders waiting for each other, wait kPatience longer, and hear of it from the store or their leader.
  static constexpr double kPatience = 5.0;
  Step hierarchical(Call fp, int64_t bytes, Step before, std::function<void()> across_call, Step after) {
    int32_t size = size_;
    auto kind = static_cast<tpurt_comm_kind>(fp.kind);
    fp.seq = ++hierarchical_seq_;
    std::string what = std::string(tpurt_comm_kind_name(kind)) + " #" + std::to_string(fp.seq) + " across hosts failed: ";
    Step across = on_leaders(fp, std::move(across_call));
    return [=, this] {
      auto t0 = std::chrono::steady_clock::now();
      tpurt_status s = before();
      if (!s) s = across();
      if (!s) {
        tpurt_comm_set_timeout(comm_, timeout_s_ + kPatience);
        s = after();
        tpurt_comm_set_timeout(comm_, timeout_s_);
      }
      if (s) {
        tpurt_fail_message(s, (what + tpurt_last_error()).c_str());
        if (s == TPURT_ERR_RUNTIME) post_failure();
        return s;
      }
      return tpurt_comm_record(kind, bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), size);
    };
  }

  // Reduced onto the leader, across the leaders, broadcast from the leader: every rank gets the
  // leader's bits. avg is a sum divided once, by the leader.
  Step hierarchical_all_reduce(const at::Tensor& t, const c10d::ReduceOp& rop) {
    auto [op, scale] = reduce_op(rop);
    void* p = t.data_ptr();
    int64_t n = t.numel(), bytes = nbytes(t);
    tpurt_dtype dt = dtype_of(t);
    tpurt_reduce_op local = op == TPURT_RED_AVG ? TPURT_RED_SUM : op;
    bool avg = op == TPURT_RED_AVG;
    c10d::AllreduceOptions o;
    o.reduceOp = gloo_op(rop);
    at::Tensor v = view(t);
    int world = size_;
    return hierarchical({TPURT_COMM_ALL_REDUCE, dt, n, op}, bytes,
                        [=, this] { return tpurt_reduce(comm_, p, p, n, dt, local, scale, 0); },
                        [=, this] {
                          std::vector<at::Tensor> vs{v};
                          await_leaders(leaders_->allreduce(vs, o));
                          if (avg) v.div_(world);
                        },
                        [=, this] { return tpurt_broadcast(comm_, p, bytes, 0); });
  }

  // Within the root's host from the root, across the leaders from the root host's, then within the others.
  Step hierarchical_broadcast(void* p, int64_t bytes, int root) {
    int root_host = host_of_[root], root_local = local_rank_of(root);
    bool root_here = host_of_[rank_] == root_host;
    at::Tensor v = at::from_blob(p, {bytes}, at::TensorOptions().dtype(at::kByte));
    c10d::BroadcastOptions o;
    o.rootRank = root_host;
    return hierarchical({TPURT_COMM_BROADCAST, -1, bytes, -1, root_host}, bytes,
                        // elsewhere a barrier: every rank posts what it calls on its segment first, so calls that differ within a host fail at once
                        [=, this] { return root_here ? tpurt_broadcast(comm_, p, bytes, root_local) : tpurt_barrier(comm_); },
                        [=, this] {
                          std::vector<at::Tensor> vs{v};
                          await_leaders(leaders_->broadcast(vs, o));
                        },
                        [=, this] { return root_here ? TPURT_OK : tpurt_broadcast(comm_, p, bytes, 0); });
  }

  // Hosts hold consecutive ranks (contiguous_): this host's blocks are gathered onto its leader, the
  // leaders gather the hosts' blocks, and the leader broadcasts the whole.
  Step hierarchical_all_gather(const void* src, void* dst, int64_t bytes) {
    int64_t host_bytes = local_size() * bytes, all_bytes = size_ * bytes;
    char* block = static_cast<char*>(dst) + host_of_[rank_] * host_bytes;
    at::Tensor all = at::from_blob(dst, {all_bytes}, at::TensorOptions().dtype(at::kByte));
    at::Tensor mine = leader() ? at::empty({host_bytes}, at::kByte) : at::Tensor();
    return hierarchical({TPURT_COMM_ALL_GATHER, -1, all_bytes}, all_bytes,
                        [=, this] { return tpurt_gather(comm_, src, leader() ? block : nullptr, bytes, 0); },
                        [=, this] {
                          memcpy(mine.data_ptr(), block, host_bytes);
                          at::Tensor out = all, in = mine;
                          await_leaders(leaders_->_allgather_base(out, in));
                        },
                        [=, this] { return tpurt_broadcast(comm_, dst, all_bytes, 0); });
  }

  // Hosts hold consecutive ranks: the whole input is reduced onto the leader, all-reduced across the
  // leaders (Gloo's reduce_scatter works only inside its wait(), which await_leaders cannot watch),
  // and the leader scatters its host's part.
  Step hierarchical_reduce_scatter(const at::Tensor& like, const void* src, void* dst, int64_t count, tpurt_dtype dt,
                                   const c10d::ReduceOp& rop) {
    auto [op, scale] = reduce_op(rop);
    tpurt_reduce_op local = op == TPURT_RED_AVG ? TPURT_RED_SUM : op;
    bool avg = op == TPURT_RED_AVG;
    int64_t es = like.element_size(), host_count = local_size() * count;
    at::Tensor whole, part;
    if (leader()) {
      whole = at::empty({size_ * count}, like.options().device(at::kCPU));
      part = whole.narrow(0, host_of_[rank_] * host_count, host_count);
    }
    c10d::AllreduceOptions o;
    o.reduceOp = gloo_op(rop);
    int world = size_;
    return hierarchical({TPURT_COMM_REDUCE_SCATTER, dt, size_ * count, op}, size_ * count * es,
                        [=, this] {
                          return tpurt_reduce(comm_, src, leader() ? whole.data_ptr() : nullptr, world * count, dt, local, scale, 0);
                        },
                        [=, this] {
                          std::vector<at::Tensor> vs{whole};
                          await_leaders(leaders_->allreduce(vs, o));
                          if (avg) part.div_(world);
                        },
                        [=, this] { return tpurt_scatter(comm_, leader() ? part.data_ptr() : nullptr, dst, count * es, 0); });
  }

  // ---- across hosts: through every rank's Gloo group
  // A CPU tensor over a tpu tensor's memory (host memory): what Gloo takes.
  static at::Tensor view(const at::Tensor& t) {
    if (!t.defined() || t.device().type() != kTpu) return t;
    return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(at::kCPU));
  }
  static std::vector<at::Tensor> views(const std::vector<at::Tensor>& ts) {
    std::vector<at::Tensor> out;
    for (auto& t : ts) out.push_back(view(t));
    return out;
  }
  static std::vector<std::vector<at::Tensor>> views(const std::vector<std::vector<at::Tensor>>& lists) {
    std::vector<std::vector<at::Tensor>> out;
    for (auto& l : lists) out.push_back(views(l));
    return out;
  }
  static std::vector<at::Tensor> flat(const std::vector<std::vector<at::Tensor>>& lists) {
    std::vector<at::Tensor> out;
    for (auto& l : lists) out.insert(out.end(), l.begin(), l.end());
    return out;
  }
  static std::vector<at::Tensor> cat(std::vector<at::Tensor> a, const std::vector<at::Tensor>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  static int64_t bytes_of(const std::vector<at::Tensor>& ts) {
    int64_t n = 0;
    for (auto& t : ts) n += nbytes(t);
    return n;
  }

  // What torch.tpu.metrics counts of a collective (tpurt_comm_kind_stats' bytes).
  struct Counted {
    tpurt_comm_kind kind;
    int64_t bytes;
  };

  // Runs `call` (Gloo collectives on views, waited for) once the queued work of the tensors'
  // devices ran, and counts it; the Work returned is complete, its result the given outputs.
  template <typename Call>
  c10::intrusive_ptr<c10d::Work> through_gloo(c10d::OpType op, Counted counted, const std::vector<at::Tensor>& touched,
                                              std::vector<at::Tensor> outputs, Call call) {
    int dev = -1;
    for (auto& t : touched)
      if (t.defined() && t.device().type() == kTpu && t.device().index() != dev) {
        dev = t.device().index();
        check(tpurt_stream_synchronize(current_stream(dev)));
      }
    auto t0 = std::chrono::steady_clock::now();
    call();
    check(tpurt_comm_record(counted.kind, counted.bytes,
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), size_));
    auto type = c10::ListType::create(c10::TensorType::get());
    auto future = dev >= 0 ? c10::make_intrusive<c10::ivalue::Future>(type, std::vector<c10::Device>{c10::Device(kTpu, dev)})
                           : c10::make_intrusive<c10::ivalue::Future>(type);
    future->markCompleted(c10::IValue(outputs));
    auto work = c10::make_intrusive<TpuWork>(rank_, op, std::move(outputs), nullptr, future);
    work->tpu_device_ = dev;
    return work;
  }

  // Gloo reduces with SUM, PRODUCT, MIN, MAX and the bitwise ops: AVG is a SUM then a division,
  // PREMUL_SUM a multiplication then a SUM.
  static c10d::ReduceOp gloo_op(const c10d::ReduceOp& op) {
    bool summed = op.op_ == c10d::ReduceOp::AVG || op.op_ == c10d::ReduceOp::PREMUL_SUM;
    return summed ? c10d::ReduceOp(c10d::ReduceOp::SUM) : op;
  }
  void check_reduction(const at::Tensor& t, const c10d::ReduceOp& rop) {
    check(tpurt_check_reduction(dtype_of(t), reduce_op(rop).first));
  }

  c10::intrusive_ptr<c10d::Work> reduce_through_gloo(c10d::OpType kind, std::vector<at::Tensor>& tensors,
                                                     const c10d::ReduceOp& rop, int root) {
    for (auto& t : tensors) check_reduction(t, rop);
    double scale = reduce_op(rop).second;
    return through_gloo(kind, {root < 0 ? TPURT_COMM_ALL_REDUCE : TPURT_COMM_REDUCE, bytes_of(tensors)}, tensors, tensors, [&] {
      auto v = views(tensors);
      if (rop.op_ == c10d::ReduceOp::PREMUL_SUM)
        for (auto& t : v) t.mul_(scale);
      if (root < 0) {
        c10d::AllreduceOptions o;
        o.reduceOp = gloo_op(rop);
        gloo_->allreduce(v, o)->wait();
      } else {
        c10d::ReduceOptions o;
        o.reduceOp = gloo_op(rop);
        o.rootRank = root;
        gloo_->reduce(v, o)->wait();
      }
      if (rop.op_ == c10d::ReduceOp::AVG && (root < 0 || root == rank_))
        for (auto& t : v) t.div_(size_);
    });
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_through_gloo(c10d::OpType kind, std::vector<at::Tensor>& outs,
                                                             std::vector<at::Tensor>& ins, const c10d::ReduceScatterOptions& opts) {
    TORCH_CHECK_VALUE(outs.size() == ins.size(), "tpu_dist: as many outputs as inputs");
    for (auto& t : outs) check_reduction(t, opts.reduceOp);
    double scale = reduce_op(opts.reduceOp).second;
    return through_gloo(kind, {TPURT_COMM_REDUCE_SCATTER, bytes_of(ins)}, cat(ins, outs), outs, [&] {
      c10d::ReduceScatterOptions o;
      o.reduceOp = gloo_op(opts.reduceOp);
      auto out = views(outs);
      for (size_t k = 0; k < ins.size(); k++) {
        at::Tensor in = view(ins[k]);
        if (opts.reduceOp.op_ == c10d::ReduceOp::PREMUL_SUM) in = in * scale;  // not the caller's input
        gloo_->_reduce_scatter_base(out[k], in, o)->wait();
        if (opts.reduceOp.op_ == c10d::ReduceOp::AVG) out[k].div_(size_);
      }
    });
  }

  // Alone, the host waits for a send or recv; in a batch (batch_isend_irecv) they all start, and
  // endCoalescing waits for them together, so ranks exchanging both ways do not wait on each other.
  c10::intrusive_ptr<c10d::Work> p2p_through_gloo(std::vector<at::Tensor>& tensors, bool is_send, int peer, int tag) {
    auto op = is_send ? c10d::OpType::SEND : c10d::OpType::RECV;
    if (!coalescing_)
      return through_gloo(op, {TPURT_COMM_SEND_RECV, bytes_of(tensors)}, tensors, tensors, [&] {
        auto v = views(tensors);
        (is_send ? gloo_->send(v, peer, tag) : gloo_->recv(v, peer, tag))->wait();
      });
    for (auto& t : tensors)
      if (t.device().type() == kTpu) check(tpurt_stream_synchronize(current_stream(t.device().index())));
    auto v = views(tensors);
    pending_gloo_.push_back(is_send ? gloo_->send(v, peer, tag) : gloo_->recv(v, peer, tag));
    pending_tensors_.push_back(tensors[0]);
    return c10::make_intrusive<TpuWork>(rank_, op, tensors, nullptr, nullptr);
  }

  c10::intrusive_ptr<c10d::Backend> gloo_;     // every rank's Gloo group, set when the group spans hosts
  c10::intrusive_ptr<c10d::Backend> leaders_;  // on each host's first rank then: the leaders' Gloo group
  c10::intrusive_ptr<c10d::Store> store_;      // then: the group's store (failures posted for other hosts)
  std::vector<int> host_of_;                   // then: each rank's host (0, 1, ... in order of their first ranks)
  std::vector<int> local_of_;                  // then: the ranks on this host, in order
  int hosts_ = 1;
  uint64_t hierarchical_seq_ = 0;
  std::atomic<double> timeout_s_{0};
  bool contiguous_ = true;  // each host holds the same number of consecutive ranks
  std::vector<c10::intrusive_ptr<c10d::Work>> pending_gloo_;
  tpurt_comm* comm_ = nullptr;
  tpurt_event* ready_ = nullptr;  // marks the issuing stream's work a collective must follow
  std::shared_ptr<Outcome> broken_ = std::make_shared<Outcome>();  // finished by the first failure
  std::set<int> used_devices_;
  bool coalescing_ = false;
  std::vector<tpurt_p2p> pending_;
  std::vector<at::Tensor> pending_tensors_;
};

// A group spanning hosts: across_hosts is every rank's Gloo group, leaders the leaders' (None off
// the leaders), host_of each rank's host, store this host's.
c10::intrusive_ptr<ProcessGroupTpu> create(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                           const std::chrono::duration<float>& timeout, py::object across_hosts,
                                           py::object leaders, std::vector<int> host_of) {
  c10::intrusive_ptr<c10d::Backend> gloo, leading;
  if (!across_hosts.is_none()) gloo = across_hosts.cast<c10::intrusive_ptr<c10d::Backend>>();
  if (!leaders.is_none()) leading = leaders.cast<c10::intrusive_ptr<c10d::Backend>>();
  py::gil_scoped_release no_gil;
  return c10::make_intrusive<ProcessGroupTpu>(store, rank, size, timeout.count(), std::move(gloo), std::move(leading),
                                              std::move(host_of));
}

}  // namespace

void add_distributed(py::module& m) {
  py::class_<ProcessGroupTpu, c10d::Backend, c10::intrusive_ptr<ProcessGroupTpu>>(m, "ProcessGroupTPU");
  m.def("_collective_stats", [] {  // kind -> (calls, bytes, seconds, ICI seconds)
    tpurt_comm_kind_stats st[TPURT_COMM_KIND_COUNT];
    tpurt_comm_get_stats(st);
    py::dict d;
    for (int k = 0; k < TPURT_COMM_KIND_COUNT; k++)
      d[tpurt_comm_kind_name(k)] = py::make_tuple(st[k].calls, st[k].bytes, st[k].seconds, st[k].ici_seconds);
    return d;
  });
  m.def("_create_tpu_dist_backend", &create, py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
        py::arg("across_hosts") = py::none(), py::arg("leaders") = py::none(), py::arg("host_of") = std::vector<int>{});
}

}  // namespace torch_tpu
