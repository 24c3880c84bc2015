// The device allocator (a view of the runtime's caching allocator for PyTorch) and the
// pinned host allocator.
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <mutex>
#include <unordered_set>

#include "Runtime.h"

namespace torch_tpu {
namespace {

void free_device(void* p) { tpurt_free(p); }

void fill(c10::CachingDeviceAllocator::StatArray& a, int64_t current, int64_t peak,
          int64_t allocated = 0, int64_t freed = 0) {
  auto& s = a[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
  s.current = current;
  s.peak = peak;
  s.allocated = allocated;
  s.freed = freed;
}

struct TpuAllocator final : c10::DeviceAllocator {
  c10::DataPtr allocate(size_t nbytes) override {
    auto device = c10::impl::getDeviceGuardImpl(kTpu)->getDevice().index();
    void* p = nullptr;
    check(tpurt_malloc(device, nbytes, current_stream(device), &p));
    return {p, p, &free_device, c10::Device(kTpu, device)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_device; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    synchronize_device(tpurt_pointer_device(src));
    std::memcpy(dest, src, count);
  }
  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t) override { tpurt_empty_cache(); }
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    check(tpurt_record_stream(ptr.get(), tpurt_stream_make(stream.device_index(), static_cast<int>(stream.id()))));
  }
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    tpurt_memory_stats m{};
    m.struct_size = sizeof m;
    check(tpurt_memory_get_stats(device, &m));
    c10::CachingDeviceAllocator::DeviceStats s;
    fill(s.allocation, m.alloc_count - m.free_count, m.alloc_count - m.free_count, m.alloc_count, m.free_count);
    fill(s.segment, m.segment_count, m.segment_count, m.segment_alloc_count, m.segment_free_count);
    fill(s.active, m.alloc_count - m.free_count, m.alloc_count - m.free_count, m.alloc_count, m.free_count);
    fill(s.allocated_bytes, m.allocated_bytes, m.allocated_peak);
    fill(s.active_bytes, m.allocated_bytes, m.allocated_peak);
    fill(s.reserved_bytes, m.reserved_bytes, m.reserved_peak);
    fill(s.requested_bytes, m.requested_bytes, m.requested_bytes);
    s.num_ooms = m.oom_count;
    s.num_alloc_retries = m.cache_flushes;
    s.num_device_alloc = m.segment_alloc_count;
    s.num_device_free = m.segment_free_count;
    return s;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override { check(tpurt_memory_reset_counts(device)); }
  void resetPeakStats(c10::DeviceIndex device) override { check(tpurt_memory_reset_peak(device)); }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    tpurt_memory_stats m{};
    m.struct_size = sizeof m;
    check(tpurt_memory_get_stats(device, &m));
    return {static_cast<size_t>(m.capacity_bytes - m.reserved_bytes), static_cast<size_t>(m.capacity_bytes)};
  }
};

TpuAllocator device_allocator;

// Pinned host memory: ordinary host memory the runtime remembers, so is_pinned() answers.
std::mutex pinned_mu;
std::unordered_set<const void*> pinned;

void free_pinned(void* p) {
  {
    std::lock_guard<std::mutex> g(pinned_mu);
    pinned.erase(p);
  }
  std::free(p);
}

struct PinnedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* p = nullptr;
    if (nbytes && posix_memalign(&p, 64, nbytes) != 0) p = nullptr;
    TORCH_CHECK_WITH(OutOfMemoryError, !nbytes || p, "out of host memory pinning ", nbytes, " bytes");
    std::lock_guard<std::mutex> g(pinned_mu);
    pinned.insert(p);
    return {p, p, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

PinnedAllocator pinned_allocator;

}  // namespace

c10::Allocator* pinned_host_allocator() { return &pinned_allocator; }

bool is_pinned_ptr(const void* p) {
  std::lock_guard<std::mutex> g(pinned_mu);
  return pinned.count(p) > 0;
}

REGISTER_ALLOCATOR(kTpu, &device_allocator);

}  // namespace torch_tpu
