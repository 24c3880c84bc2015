// DeviceGuardImpl for tpu: current device, streams and events map onto the runtime's.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "Runtime.h"

namespace torch_tpu {
namespace {

int32_t handle(const c10::Stream& s) { return tpurt_stream_make(s.device_index(), static_cast<int>(s.id())); }

c10::Stream make_stream(c10::DeviceIndex d, int32_t h) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kTpu, d), tpurt_stream_index(h));
}

struct TpuGuardImpl final : c10::impl::DeviceGuardImplInterface {
  TpuGuardImpl() = default;
  explicit TpuGuardImpl(c10::DeviceType t) { TORCH_CHECK(t == kTpu, "expected the tpu device type, got ", t); }
  c10::DeviceType type() const override { return kTpu; }
  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kTpu, static_cast<c10::DeviceIndex>(tpurt_device_get())); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kTpu, "expected a tpu device, got ", d);
    check(tpurt_device_set(d.index() < 0 ? 0 : d.index()));
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override { tpurt_device_set(d.index() < 0 ? 0 : d.index()); }
  c10::Stream getStream(c10::Device d) const noexcept override {
    auto idx = d.index() < 0 ? static_cast<c10::DeviceIndex>(tpurt_device_get()) : d.index();
    return make_stream(idx, tpurt_stream_get_current(idx));
  }
  c10::Stream getDefaultStream(c10::Device d) const override { return make_stream(d.index() < 0 ? 0 : d.index(), 0); }
  c10::Stream getNewStream(c10::Device d, int priority = 0) const override {
    auto idx = d.index() < 0 ? static_cast<c10::DeviceIndex>(tpurt_device_get()) : d.index();
    int32_t h = 0;
    check(tpurt_stream_create(idx, &h));
    return make_stream(idx, h);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool = false) const override { return getNewStream(d); }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    auto old = getStream(s.device());
    tpurt_stream_set_current(handle(s));
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override { return static_cast<c10::DeviceIndex>(tpurt_device_count()); }

  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    tpurt_event_destroy(static_cast<tpurt_event*>(event));
  }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "Event device index ", device_index,
                " does not match recording stream's device index ", stream.device_index(), ".");
    auto* ev = static_cast<tpurt_event*>(*event);
    if (!ev) {
      check(tpurt_event_create(flag == c10::EventFlag::BACKEND_DEFAULT, &ev));
      *event = ev;
    }
    check(tpurt_event_record(ev, handle(stream)));
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (event) check(tpurt_event_wait(static_cast<tpurt_event*>(event), handle(stream)));
  }
  bool queryEvent(void* event) const override { return !event || tpurt_event_query(static_cast<tpurt_event*>(event)); }
  bool queryStream(const c10::Stream& stream) const override { return tpurt_stream_query(handle(stream)); }
  void synchronizeStream(const c10::Stream& stream) const override { check(tpurt_stream_synchronize(handle(stream))); }
  void synchronizeEvent(void* event) const override {
    if (event) check(tpurt_event_synchronize(static_cast<tpurt_event*>(event)));
  }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    check(tpurt_device_synchronize(device_index < 0 ? tpurt_device_get() : device_index));
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end, "Both events must be recorded before calculating elapsed time.");
    double ms = 0;
    check(tpurt_event_elapsed_ms(static_cast<tpurt_event*>(start), static_cast<tpurt_event*>(end), &ms));
    return ms;
  }
  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const override {
    check(tpurt_record_stream(data_ptr.get(), handle(stream)));
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

}  // namespace torch_tpu
