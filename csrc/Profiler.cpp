// The profilers' tpu side, through PyTorch's two PrivateUse1 hooks:
//  - torch.profiler (Kineto, ProfilerActivity.PrivateUse1): a Kineto child profiler, registered
//    through PyTorch's PrivateUse1 profiler registry, that turns the runtime's trace records
//    (tpurt.h 0.8) into device events: one process per tpu, one track per stream, each event
//    linked to the op that issued it, so that key_averages() counts its time as the op's.
//  - the legacy torch.autograd.profiler.profile(use_device="tpu"): ProfilerStubs that time each
//    op with a pair of timing events on the current stream, as CUDA's stubs do.
//
// The registry is declared only when USE_KINETO is defined, which PyTorch defines for its own
// build; the installed wheel is built with Kineto (torch.autograd.kineto_available()). fmt is
// used header-only: GenericTraceActivity formats its args with it and libtorch exports none of it.
#define FMT_HEADER_ONLY
#ifndef USE_KINETO
#define USE_KINETO
#endif

#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <c10/util/ApproximateClock.h>

#include <set>
#include <string>
#include <vector>

#include "Runtime.h"

namespace torch_tpu {
namespace {

using libkineto::ActivityType;

// Correlation ids of the ops this thread is inside (Kineto pushes one per op it records): the
// innermost becomes the runtime's tag, so a kernel links to the op that launched it.
thread_local std::vector<uint64_t> op_stack;

// Every arg the runtime put on the record ("emulator_us", "flops", "bytes"; the runtime's
// tpurt_trace_note_call is where more join), and where the event ran.
void add_event_args(libkineto::GenericTraceActivity& act, const tpurt_trace_record& r) {
  for (int i = 0; i < r.nargs; i++) act.addMetadata(r.args[i].key, r.args[i].value);
  act.addMetadata("device", act.device);
  act.addMetadata("stream", act.resource);
}

std::string device_name(int device) { return "tpu:" + std::to_string(device); }

class TpuSession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    // The records' clock is the runtime's monotonic one; PyTorch stamps host events with c10's.
    clock_offset_ns_ = c10::getTime() - tpurt_trace_now_ns();
    buffer_->span = libkineto::TraceSpan(tpurt_trace_now_ns() + clock_offset_ns_, 0, "tpu");
    if (tpurt_trace_start() != TPURT_OK) errors_.push_back(tpurt_last_error());
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    tpurt_trace_stop();
    buffer_->span.endTime = tpurt_trace_now_ns() + clock_offset_ns_;
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override {
    std::vector<std::string> all = errors_;
    if (int64_t dropped = tpurt_trace_dropped())
      all.push_back("tpu trace full: " + std::to_string(dropped) + " device events dropped");
    return all;
  }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked_op, int64_t start,
                    int64_t end) override {
    std::set<std::pair<int, int>> streams;
    for (int64_t i = 0, n = tpurt_trace_count(); i < n; i++) {
      const tpurt_trace_record* r = tpurt_trace_get(i);
      if (!r) continue;
      buffer_->emplace_activity(buffer_->span, ActivityType::CONCURRENT_KERNEL, std::string(r->name));
      auto& act = *buffer_->activities.back();
      act.device = tpurt_stream_device(r->stream);
      act.resource = tpurt_stream_index(r->stream);
      act.id = static_cast<int32_t>(i + 1);
      act.startTime = r->start_ns + clock_offset_ns_;
      act.endTime = r->end_ns + clock_offset_ns_;
      act.linked = r->tag ? linked_op(static_cast<int32_t>(r->tag)) : nullptr;
      add_event_args(act, *r);
      act.log(logger);
      streams.insert({act.device, act.resource});
    }
    // getDeviceInfo names tpu:0; the other chips' processes are named here.
    int named = 0;
    for (auto [device, index] : streams) {
      if (device != named)
        logger.handleDeviceInfo({device, device + libkineto::kExceedMaxPid, device_name(device), device_name(device)},
                                start);
      named = device;
      resources_.push_back({index, index, device, device_name(device) + " stream " + std::to_string(index)});
    }
  }

  // Always tpu:0, also when it ran nothing: a session naming no device makes Kineto label pids
  // 0-15 as GPUs, tpu:0's among them.
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(
        libkineto::DeviceInfo{0, libkineto::kExceedMaxPid, device_name(0), device_name(0)});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return resources_; }

  // The events (Kineto's logger keeps pointers to their trace span) live as long as the trace.
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

  void pushCorrelationId(uint64_t id) override {
    op_stack.push_back(id);
    tpurt_trace_set_tag(id);
  }

  void popCorrelationId() override {
    if (!op_stack.empty()) op_stack.pop_back();
    tpurt_trace_set_tag(op_stack.empty() ? 0 : op_stack.back());
  }

 private:
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
  std::vector<libkineto::ResourceInfo> resources_;
  std::vector<std::string> errors_;
  int64_t clock_offset_ns_ = 0;
};

class TpuActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return activities_; }

  // A session only when the profile asks for device activity (ProfilerActivity.PrivateUse1):
  // a CPU-only profile records nothing on the device.
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType>& activity_types,
                                                                 const libkineto::Config&) override {
    if (!activity_types.count(ActivityType::CONCURRENT_KERNEL)) return nullptr;
    return std::make_unique<TpuSession>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<ActivityType>& activity_types,
                                                                 const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  std::string name_ = "tpu";
  std::set<ActivityType> activities_ = {ActivityType::CONCURRENT_KERNEL};
};

REGISTER_PRIVATEUSE1_PROFILER(TpuActivityProfiler);

using torch::profiler::impl::ProfilerVoidEventStub;

struct TpuStubs final : torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event, int64_t* cpu_ns) const override {
    int d = tpurt_device_get();
    if (device) *device = static_cast<c10::DeviceIndex>(d);
    tpurt_event* ev = nullptr;
    check(tpurt_event_create(1, &ev));
    *event = std::shared_ptr<void>(ev, [](void* e) { tpurt_event_destroy(static_cast<tpurt_event*>(e)); });
    if (cpu_ns) *cpu_ns = c10::getTime();
    check(tpurt_event_record(ev, tpurt_stream_get_current(d)));
  }
  // Microseconds, as CUDA's stubs answer.
  float elapsed(const ProfilerVoidEventStub* start, const ProfilerVoidEventStub* end) const override {
    double ms = 0;
    check(tpurt_event_elapsed_ms(static_cast<tpurt_event*>(start->get()), static_cast<tpurt_event*>(end->get()), &ms));
    return static_cast<float>(ms * 1000.0);
  }
  // No annotation ranges on the device (CUDA's are NVTX's).
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override {
    int current = tpurt_device_get();
    for (int d = 0; d < tpurt_device_count(); d++) {
      check(tpurt_device_set(d));
      op(d);
    }
    check(tpurt_device_set(current));
  }
  void synchronize() const override {
    for (int d = 0; d < tpurt_device_count(); d++) check(tpurt_device_synchronize(d));
  }
};

struct RegisterStubs {
  RegisterStubs() {
    static TpuStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
} register_stubs;

}  // namespace
}  // namespace torch_tpu
