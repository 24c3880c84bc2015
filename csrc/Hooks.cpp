// PrivateUse1 hooks, the per-device Philox generator, and storage resizing.
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/util/CallOnce.h>

#include <mutex>
#include <vector>

#include "Generator.h"
#include "Runtime.h"

namespace torch_tpu {

c10::Allocator* pinned_host_allocator();
bool is_pinned_ptr(const void* p);

TpuGenerator::TpuGenerator(c10::DeviceIndex device)
    : c10::GeneratorImpl(c10::Device(kTpu, device), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}

void TpuGenerator::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}
void TpuGenerator::set_offset(uint64_t offset) { offset_ = offset; }
uint64_t TpuGenerator::get_offset() const { return offset_; }
uint64_t TpuGenerator::current_seed() const { return seed_; }
uint64_t TpuGenerator::seed() {
  auto s = c10::detail::getNonDeterministicRandom();
  set_current_seed(s);
  return s;
}

// State layout: seed (8 bytes) then Philox offset (8 bytes), as a CPU uint8 tensor.
void TpuGenerator::set_state(const c10::TensorImpl& state) {
  TORCH_CHECK_TYPE(state.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
                   "RNG state must be a torch.ByteTensor");
  TORCH_CHECK_VALUE(state.numel() == 16, "tpu RNG state must hold 16 bytes, got ", state.numel());
  std::memcpy(&seed_, state.data(), 8);
  std::memcpy(&offset_, static_cast<const char*>(state.data()) + 8, 8);
}
c10::intrusive_ptr<c10::TensorImpl> TpuGenerator::get_state() const {
  auto t = at::empty({16}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(t.data_ptr(), &seed_, 8);
  std::memcpy(static_cast<char*>(t.data_ptr()) + 8, &offset_, 8);
  return t.getIntrusivePtr();
}
TpuGenerator* TpuGenerator::clone_impl() const {
  auto* g = new TpuGenerator(device().index());
  g->seed_ = seed_;
  g->offset_ = offset_;
  return g;
}
std::pair<uint64_t, uint64_t> TpuGenerator::reserve(uint64_t counters) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto r = std::make_pair(seed_, offset_);
  offset_ += counters;
  return r;
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::vector<at::Generator> gens;
  static c10::once_flag once;
  c10::call_once(once, [] {
    for (int i = 0; i < tpurt_device_count(); i++) {
      gens.push_back(at::make_generator<TpuGenerator>(static_cast<c10::DeviceIndex>(i)));
      gens.back().set_current_seed(c10::default_rng_seed_val);
    }
  });
  auto idx = device < 0 ? static_cast<c10::DeviceIndex>(tpurt_device_get()) : device;
  TORCH_CHECK_VALUE(idx >= 0 && idx < static_cast<c10::DeviceIndex>(gens.size()), "invalid tpu device index ", idx);
  return gens[idx];
}

namespace {

struct TpuHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return tpurt_device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(tpurt_device_count()); }
  void setCurrentDevice(c10::DeviceIndex d) const override { check(tpurt_device_set(d)); }
  c10::DeviceIndex getCurrentDevice() const override { return static_cast<c10::DeviceIndex>(tpurt_device_get()); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    auto old = getCurrentDevice();
    setCurrentDevice(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    if (d < 0 || d >= deviceCount()) return getCurrentDevice();
    return exchangeDevice(d);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override { return default_generator(d); }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override {
    auto g = at::make_generator<TpuGenerator>(d < 0 ? getCurrentDevice() : d);
    g.set_current_seed(c10::default_rng_seed_val);
    return g;
  }
  at::Device getDeviceFromPtr(void* data) const override {
    int d = tpurt_pointer_device(data);
    TORCH_CHECK(d >= 0, "pointer ", data, " is not tpu memory");
    return at::Device(kTpu, static_cast<c10::DeviceIndex>(d));
  }
  bool isPinnedPtr(const void* data) const override { return is_pinned_ptr(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_host_allocator(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override {
    TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
    auto* impl = storage.unsafeGetStorageImpl();
    size_t old_bytes = impl->nbytes();
    c10::DataPtr fresh = impl->allocator()->allocate(new_bytes);
    size_t keep = std::min(old_bytes, new_bytes);
    if (keep) {
      synchronize_device(storage.device().index());
      std::memcpy(fresh.get(), impl->data(), keep);
    }
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(new_bytes);
  }
};

[[maybe_unused]] const bool registered = [] {
  at::RegisterPrivateUse1HooksInterface(new TpuHooks());
  return true;
}();

}  // namespace
}  // namespace torch_tpu
