// torchport emulated NPU: a real PrivateUse1 device whose memory is host memory (the shape of
// PyTorch's OpenReg reference backend).
//
// * npu tensors are plain torch.Tensor with a PrivateUse1 TensorImpl; their storage comes from
//   NpuAllocator (host memory, accounted per device: allocated / peak / counts, a per-process limit
//   whose excess raises torch.OutOfMemoryError);
// * a zero-copy boxed fallback runs every other operator's CPU kernel: npu arguments are aliased as
//   CPU tensors over the same bytes, outputs are re-tagged as npu (outputs that alias an input stay
//   views of that input's npu storage; fresh outputs are adopted without a copy);
// * explicit kernels for factories, copies, views, resize_/set_, record_stream, _local_scalar_dense,
//   native_dropout (device RNG), and pinning;
// * a device guard with real indices (per-thread current device), accelerator hooks, device
//   generators (each delegating to a host generator on a stream of its own), a pinned host allocator.
// * streams with torch_npu's ids (pools, sync-launch, external) and timing events; execution is
//   synchronous (host memory), so every stream is idle.
//
// Python hooks (optional, set by torchport.emulate): a per-operator classifier called once per
// operator (bits: warn as CPU fallback, upcast fp16 matmul/conv to fp32, post-process outputs,
// allow host tensor arguments), a fallback notifier and a post-processor (fault injection).
#include <torch/extension.h>
#include <torch/library.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/AllocatorConfig.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/env.h>
#include <torch/csrc/Generator.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <unistd.h>

namespace {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;
constexpr c10::DispatchKey kNpuKey = c10::DispatchKey::PrivateUse1;
constexpr int kMaxDevices = 64;
std::atomic<int> g_capacity{1};
std::atomic<c10::DeviceIndex> g_devices{0};
std::atomic<bool> g_available{false};
thread_local c10::DeviceIndex t_current = 0;

void check_installed(const char* what) {
  TORCH_CHECK(g_available.load(), what,
              ": this tensor lives on the emulated NPU, which was uninstalled (torchport.emulate.uninstall()); "
              "move tensors to cpu before uninstalling");
}

c10::DeviceIndex checked_index(c10::DeviceIndex idx) {
  if (idx < 0) return t_current;
  TORCH_CHECK(idx < g_devices.load(), "Invalid device ordinal: ", static_cast<int>(idx),
              ", device count: ", static_cast<int>(g_devices.load()));
  return idx;
}

// The current device becomes `idx` (negative: unchanged). Checked against the guard's count (the autograd
// engine starts a thread per index below it), so devices of a larger earlier install stay selectable.
void select_device(c10::DeviceIndex idx) {
  TORCH_CHECK(idx < g_capacity.load(), "Invalid device ordinal: ", static_cast<int>(idx),
              ", device count: ", g_capacity.load());
  if (idx >= 0) t_current = idx;
}

// ------------------------------------------------------------------------------------ memory
// The device allocator: host memory with torch_npu's caching-allocator statistics (c10's DeviceStats,
// per device) and its limits (PYTORCH_NPU_ALLOC_CONF's per_process_memory_fraction, the 1 EB cap).
// Nothing is cached: a freed block goes back to the host at once, so every live block is its own
// segment, reserved == allocated and empty_cache has nothing to release. Blocks are rounded to 512
// bytes and pooled (small: <= 1 MiB) as on the card. When the host refuses an allocation the card
// would grant (the card has 64 GiB), the block is mapped lazily (MAP_NORESERVE): pages are committed
// when written.
constexpr int64_t kTotalMemory = 64LL << 30;  // a 910B3's HBM
constexpr size_t kMinBlock = 512;
constexpr size_t kSmallSize = 1 << 20;
constexpr size_t kOneEB = 1ULL << 60;
// what the card's driver and runtime hold of the HBM, never free to the program (a fixed stand-in):
// mem_get_info's free is below total even with nothing allocated, as on a card
constexpr int64_t kRuntimeHeld = 1LL << 30;

enum class MemKind { kOwn, kMapped, kAdopted };
struct MemCtx {  // one live block (the DataPtr's context)
  void* ptr = nullptr;
  size_t size = 0, requested = 0;
  c10::DeviceIndex dev = 0;
  MemKind kind = MemKind::kOwn;
  c10::Storage keep;  // kAdopted: the host storage whose bytes these are
};
struct DevMem {
  c10::CachingDeviceAllocator::DeviceStats stats;
  int64_t limit = kTotalMemory;
  std::unordered_set<MemCtx*> live;
};
std::mutex g_mem_mutex;
DevMem g_mem[kMaxDevices];

// torch_npu's format_size
std::string format_size(uint64_t size) {
  char buf[64];
  if (size <= 1024) {
    std::snprintf(buf, sizeof(buf), "%llu bytes", static_cast<unsigned long long>(size));
  } else if (size <= 1048576) {
    std::snprintf(buf, sizeof(buf), "%.2f KiB", size / 1024.0);
  } else if (size <= 1073741824ULL) {
    std::snprintf(buf, sizeof(buf), "%.2f MiB", size / 1048576.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", size / 1073741824.0);
  }
  return buf;
}

// ---- PYTORCH_NPU_ALLOC_CONF, read when the allocator first serves (as torch_npu's NPUAllocatorConfig)
std::atomic<bool> g_conf_armed{false};  // set once the emulator is installed: its own set-up allocations read nothing
std::atomic<bool> g_conf_done{false};
std::mutex g_conf_mutex;
bool g_throw_on_oom = false;  // throw_on_npumalloc_oom

const std::unordered_set<std::string>& npu_conf_keys() {
  static const std::unordered_set<std::string> keys{
      "pin_memory_expandable_segments", "pinned_mem_register", "base_addr_aligned_kb", "page_size",
      "segment_size_mb", "multi_stream_lazy_reclaim", "pinned_reserve_segment_size_mb",
      "per_process_memory_fraction", "release_lock_on_npumalloc", "throw_on_npumalloc_oom"};
  return keys;
}
const std::unordered_set<std::string>& npu_supported_acc_keys() {
  static const std::unordered_set<std::string> keys{
      "max_split_size_mb", "garbage_collection_threshold", "roundup_power2_divisions", "expandable_segments",
      "pinned_use_background_threads", "large_segment_size_mb", "max_non_split_rounding_mb",
      "pinned_max_round_threshold_mb", "pinned_max_cached_size_mb"};
  return keys;
}

bool conf_bool(const c10::CachingAllocator::ConfigTokenizer& tok, size_t& i, const char* key) {
  tok.checkToken(++i, ":");
  TORCH_CHECK(++i < tok.size(), "Error, expecting ", key, " value");
  TORCH_CHECK(tok[i] == "True" || tok[i] == "False", "Expected a single True/False argument for ", key);
  return tok[i] == "True";
}

void parse_alloc_conf(const std::string& env) {
  using c10::CachingAllocator::ConfigTokenizer;
  ConfigTokenizer tok(env);
  const auto& acc_keys = c10::CachingAllocator::AcceleratorAllocatorConfig::getKeys();
  std::string acc_part;  // the settings torch's own allocator config owns (torch checks their values)
  for (size_t i = 0; i < tok.size(); i++) {  // first pass: every key known (the card's checks and messages)
    const auto& key = tok[i];
    const bool in_acc = acc_keys.count(key) > 0, in_npu = npu_conf_keys().count(key) > 0;
    TORCH_CHECK_VALUE(in_acc || in_npu, "Unrecognized key '", key, "' in NPU allocator config, ");
    TORCH_CHECK_VALUE(npu_supported_acc_keys().count(key) || in_npu, "torch_npu not support key '", key,
                      "' in NPU allocator config, ");
    const size_t first = i;
    i = tok.skipKey(i);
    if (!in_npu) {
      if (!acc_part.empty()) acc_part += ",";
      for (size_t k = first; k <= i; ++k) acc_part += tok[k];
    }
    if (i + 1 < tok.size()) tok.checkToken(++i, ",");
  }
  // torch_npu registers its keys with torch's config and hands it the whole string; the emulator
  // registers nothing process-wide, so torch parses only its own keys
  if (!acc_part.empty()) c10::CachingAllocator::AcceleratorAllocatorConfig::instance().parseArgs(acc_part);
  double fraction = 1.0;
  bool throw_on_oom = false;
  for (size_t i = 0; i < tok.size(); i++) {
    const auto& key = tok[i];
    if (key == "per_process_memory_fraction") {
      tok.checkToken(++i, ":");
      TORCH_CHECK(++i < tok.size(), "Error, expecting per_process_memory_fraction value");
      double val = -1.0;
      try {
        val = std::stod(tok[i]);
      } catch (const std::exception&) {
      }
      TORCH_CHECK(val >= 0.0 && val <= 1.0, "per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
      fraction = val;
    } else if (key == "throw_on_npumalloc_oom") {
      throw_on_oom = conf_bool(tok, i, "throw_on_npumalloc_oom");
    } else {
      i = tok.skipKey(i);
    }
    if (i + 1 < tok.size()) tok.checkToken(++i, ",");
  }
  std::lock_guard<std::mutex> lock(g_mem_mutex);
  for (auto& m : g_mem) m.limit = static_cast<int64_t>(fraction * static_cast<double>(kTotalMemory));
  g_throw_on_oom = throw_on_oom;
}

// Reads the environment once; a bad value raises on every use until fixed (as on the card).
void ensure_alloc_conf() {
  if (!g_conf_armed.load() || g_conf_done.load()) return;
  std::lock_guard<std::mutex> lock(g_conf_mutex);
  if (g_conf_done.load()) return;
  auto npu_env = c10::utils::get_env("PYTORCH_NPU_ALLOC_CONF");
  auto acc_env = c10::utils::get_env("PYTORCH_ALLOC_CONF");
  TORCH_CHECK(!npu_env.has_value() || !acc_env.has_value(),
              "Both PYTORCH_NPU_ALLOC_CONF and PYTORCH_ALLOC_CONF have been set, please set only one of them.");
  if (npu_env.has_value() || acc_env.has_value()) {
    parse_alloc_conf(npu_env.has_value() ? *npu_env : *acc_env);
  } else {
    std::lock_guard<std::mutex> mem_lock(g_mem_mutex);
    for (auto& m : g_mem) m.limit = kTotalMemory;
    g_throw_on_oom = false;
  }
  g_conf_done.store(true);
}

void for_pools(c10::CachingAllocator::StatArray& a, size_t size, bool up, size_t amount) {
  const size_t pool = size <= kSmallSize ? 1 : 2;
  for (size_t idx : {size_t(0), pool}) {
    if (up) {
      a[idx].increase(amount);
    } else {
      a[idx].decrease(amount);
    }
  }
}

// Accounts a block of `requested` bytes on `dev`, or raises torch.OutOfMemoryError with the card's
// message -- before any host memory is touched.
void mem_track(MemCtx* c) {
  std::lock_guard<std::mutex> lock(g_mem_mutex);
  auto& m = g_mem[c->dev];
  auto& st = m.stats;
  const int64_t reserved = st.reserved_bytes[0].current;
  if (reserved + static_cast<int64_t>(c->size) > m.limit) {
    if (g_throw_on_oom) {
      st.num_oom_rejections++;
      TORCH_CHECK_WITH(OutOfMemoryError, false,
                       "NPU out of memory. Allocation was preemptively rejected because it would exceed "
                       "per_process_memory_fraction limit. Requested size: ", format_size(c->size));
    }
    st.num_ooms++;
    TORCH_CHECK_WITH(OutOfMemoryError, false, "NPU out of memory. Tried to allocate ", format_size(c->size),
                     " (NPU ", static_cast<int>(c->dev), "; ", format_size(kTotalMemory), " total capacity; ",
                     format_size(st.allocated_bytes[0].current), " already allocated; ",
                     format_size(st.active_bytes[0].current), " current active; ",
                     format_size(std::max<int64_t>(0, kTotalMemory - kRuntimeHeld - reserved)), " free; ",
                     format_size(m.limit), " allowed; ",
                     format_size(reserved), " reserved in total by PyTorch).",
                     "If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.");
  }
  for (auto* a : {&st.allocation, &st.segment, &st.active}) for_pools(*a, c->size, true, 1);
  for (auto* a : {&st.allocated_bytes, &st.reserved_bytes, &st.active_bytes}) for_pools(*a, c->size, true, c->size);
  for_pools(st.requested_bytes, c->size, true, c->requested);
  st.num_device_alloc++;
  m.live.insert(c);
}

void mem_untrack(MemCtx* c) {
  std::lock_guard<std::mutex> lock(g_mem_mutex);
  auto& m = g_mem[c->dev];
  if (!m.live.erase(c)) return;
  auto& st = m.stats;
  for (auto* a : {&st.allocation, &st.segment, &st.active}) for_pools(*a, c->size, false, 1);
  for (auto* a : {&st.allocated_bytes, &st.reserved_bytes, &st.active_bytes}) for_pools(*a, c->size, false, c->size);
  for_pools(st.requested_bytes, c->size, false, c->requested);
  st.num_device_free++;
}

void mem_deleter(void* p) {
  auto* c = static_cast<MemCtx*>(p);
  if (c->size) mem_untrack(c);
  if (c->kind == MemKind::kOwn && c->ptr) c10::free_cpu(c->ptr);
  if (c->kind == MemKind::kMapped) munmap(c->ptr, c->size);
  delete c;
}

// A new accounted block context (nothing is accounted for empty storages, as on the card).
std::unique_ptr<MemCtx> mem_block(size_t n, c10::DeviceIndex dev, MemKind kind) {
  auto c = std::make_unique<MemCtx>();
  c->requested = n;
  c->size = n ? (n + kMinBlock - 1) / kMinBlock * kMinBlock : 0;
  c->dev = dev;
  c->kind = kind;
  if (c->size) mem_track(c.get());
  return c;
}

struct NpuAllocator final : public c10::DeviceAllocator {
  c10::DataPtr allocate(size_t n) override {
    check_installed("allocating npu memory");
    TORCH_CHECK_WITH(OutOfMemoryError, n < kOneEB, "NPU out of memory. Tried to allocate more than 1EB memory.");
    ensure_alloc_conf();
    const c10::DeviceIndex dev = t_current;
    auto c = mem_block(n, dev, MemKind::kOwn);
    if (c->size) {
      try {
        c->ptr = c10::alloc_cpu(c->size);
      } catch (const c10::Error&) {  // the host refuses what the card would grant: map it lazily
        void* p = mmap(nullptr, c->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
          mem_deleter(c.release());
          TORCH_CHECK_WITH(OutOfMemoryError, false, "NPU out of memory. Tried to allocate ", format_size(n),
                           " (NPU ", static_cast<int>(dev), "): the host has no address space left for it");
        }
        c->ptr = p;
        c->kind = MemKind::kMapped;
      }
    }
    void* p = c->ptr;
    return {p, c.release(), &mem_deleter, c10::Device(kNpu, dev)};
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t) override {}  // nothing is cached
  void recordStream(const c10::DataPtr&, c10::Stream) override {}  // synchronous device
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex dev) override {
    ensure_alloc_conf();
    std::lock_guard<std::mutex> lock(g_mem_mutex);
    auto st = g_mem[checked_index(dev)].stats;
    st.max_split_size = -1;  // no max_split_size_mb: unlimited, as the card reports it
    return st;
  }
  template <typename Fn>
  static void each_stat(c10::CachingDeviceAllocator::DeviceStats& st, Fn fn) {
    for (auto* a : {&st.allocation, &st.segment, &st.active, &st.inactive_split, &st.allocated_bytes,
                    &st.reserved_bytes, &st.active_bytes, &st.inactive_split_bytes, &st.requested_bytes}) {
      for (auto& s : *a) fn(s);
    }
    fn(st.oversize_allocations);
    fn(st.oversize_segments);
  }
  void resetAccumulatedStats(c10::DeviceIndex dev) override {
    std::lock_guard<std::mutex> lock(g_mem_mutex);
    auto& st = g_mem[checked_index(dev)].stats;
    each_stat(st, [](c10::CachingAllocator::Stat& s) { s.reset_accumulated(); });
    st.num_alloc_retries = st.num_ooms = st.num_sync_all_streams = st.num_device_alloc = st.num_device_free =
        st.num_oom_rejections = 0;
  }
  void resetPeakStats(c10::DeviceIndex dev) override {
    std::lock_guard<std::mutex> lock(g_mem_mutex);
    each_stat(g_mem[checked_index(dev)].stats, [](c10::CachingAllocator::Stat& s) { s.reset_peak(); });
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex dev) override {
    std::lock_guard<std::mutex> lock(g_mem_mutex);
    const auto reserved = g_mem[checked_index(dev)].stats.reserved_bytes[0].current;
    return {static_cast<size_t>(std::max<int64_t>(0, kTotalMemory - kRuntimeHeld - reserved)),
            static_cast<size_t>(kTotalMemory)};
  }
};
NpuAllocator g_alloc;

// A host storage's bytes adopted as npu memory (no copy): the npu DataPtr keeps the host storage alive.
c10::Storage adopt_storage(const c10::Storage& host, c10::DeviceIndex dev) {
  const size_t n = host.nbytes();
  auto c = mem_block(n, dev, MemKind::kAdopted);
  c->keep = host;
  c->ptr = host.unsafeGetStorageImpl()->mutable_data();
  void* data = c->ptr;
  c10::DataPtr dp(data, c.release(), &mem_deleter, c10::Device(kNpu, dev));
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), n, std::move(dp),
                                                            &g_alloc, /*resizable=*/true));
}

// The host storage an npu storage adopted (undefined when its bytes came from the npu allocator).
c10::Storage adopted_host(const c10::Storage& npu) {
  const auto& dp = npu.data_ptr();
  if (dp.get_deleter() != &mem_deleter) return {};
  auto* c = static_cast<MemCtx*>(dp.get_context());
  return c->kind == MemKind::kAdopted ? c->keep : c10::Storage();
}

// An npu storage's bytes seen as host memory (no copy): the host DataPtr keeps the npu storage alive.
struct KeepCtx {
  c10::Storage keep;
};
void keep_deleter(void* p) { delete static_cast<KeepCtx*>(p); }

c10::Storage host_view(const c10::Storage& npu) {
  void* data = npu.unsafeGetStorageImpl()->mutable_data();
  c10::DataPtr dp(data, new KeepCtx{npu}, &keep_deleter, c10::Device(c10::kCPU));
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), npu.nbytes(),
                                                            std::move(dp), c10::GetCPUAllocator(), true));
}

// A tensor over `storage` with `meta`'s dtype, sizes, strides, offset and conj/neg bits.
at::Tensor tensor_on(c10::Storage storage, c10::DispatchKey key, const at::Tensor& meta) {
  auto t = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(key), meta.dtype());
  t.unsafeGetTensorImpl()->set_sizes_and_strides(meta.sizes(), meta.strides(), meta.storage_offset());
  if (meta.is_conj()) t._set_conj(true);
  if (meta.is_neg()) t._set_neg(true);
  return t;
}

at::Tensor host_alias(const at::Tensor& t) { return tensor_on(host_view(t.storage()), c10::DispatchKey::CPU, t); }

// For Python (hccl over gloo, multiprocessing): a storage adopted from the host is handed back as
// that host storage itself (shared memory stays recognisable as shared).
at::Tensor host_tensor(const at::Tensor& t) {
  c10::Storage host = adopted_host(t.storage());
  if (host) return tensor_on(std::move(host), c10::DispatchKey::CPU, t);
  return host_alias(t);
}

// An npu storage takes over `host`'s bytes (no copy; its old bytes are released).
void adopt_into(c10::StorageImpl* npu, const c10::Storage& host) {
  c10::Storage adopted = adopt_storage(host, npu->device().index());
  auto dp = adopted.unsafeGetStorageImpl()->set_data_ptr(c10::DataPtr());
  npu->set_data_ptr_noswap(std::move(dp));
  npu->set_nbytes(host.nbytes());
}

// ------------------------------------------------------------------------------------ pinned host memory
// Cached like the card's host allocator: a freed pinned block (sizes rounded up to a power of two) is
// kept for the next pin_memory() of that size until host_empty_cache(). Copies are synchronous, so a
// block is never reused while a copy still reads it.
std::mutex g_pin_mutex;
std::unordered_map<const void*, size_t> g_pinned;  // live pinned blocks -> size
std::unordered_multimap<size_t, void*> g_pin_free;  // cached blocks by size

size_t pinned_size(size_t n) {
  size_t s = 1;
  while (s < n) s <<= 1;
  return s;
}
void pinned_deleter(void* p) {
  std::lock_guard<std::mutex> lock(g_pin_mutex);
  auto it = g_pinned.find(p);
  if (it == g_pinned.end()) return;
  g_pin_free.emplace(it->second, p);
  g_pinned.erase(it);
}
struct PinnedAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    if (!n) return {nullptr, nullptr, &pinned_deleter, c10::Device(c10::kCPU)};
    const size_t size = pinned_size(n);
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(g_pin_mutex);
      auto it = g_pin_free.find(size);
      if (it != g_pin_free.end()) {
        p = it->second;
        g_pin_free.erase(it);
      }
    }
    if (!p) p = c10::alloc_cpu(size);
    std::lock_guard<std::mutex> lock(g_pin_mutex);
    g_pinned.emplace(p, size);
    return {p, p, &pinned_deleter, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &pinned_deleter; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};
PinnedAllocator g_pinned_alloc;

bool is_pinned_ptr(const void* p) {
  std::lock_guard<std::mutex> lock(g_pin_mutex);
  return g_pinned.count(p) > 0;
}

void pinned_empty_cache() {
  std::lock_guard<std::mutex> lock(g_pin_mutex);
  for (auto& kv : g_pin_free) c10::free_cpu(kv.second);
  g_pin_free.clear();
}

// ------------------------------------------------------------------------------------ card errors
// torch_npu's error suffix (NPUException.cpp formatErrorCode): "\n[ERROR] <time> (PID:, Device:, RankID:)
// ERR<submodule:2><code:3> <SUBMODULE> <text>", so messages match the card's and its tests' regexes.
enum CardSub : int { kPTA = 0, kOPS = 1 };
enum CardErr : int { kErrParam = 1, kErrType = 2, kErrValue = 3, kErrInternal = 5, kErrNotSupport = 7 };

std::string card_error(CardSub sub, CardErr code) {
  static const char* subs[] = {"PTA", "OPS"};
  const char* text = code == kErrParam ? "invalid parameter"
                     : code == kErrType ? "invalid type"
                     : code == kErrValue ? "invalid value"
                     : code == kErrInternal ? "internal error"
                                            : "feature not supported";
  char when[32];
  std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof(when), "%Y-%m-%d-%H:%M:%S", std::localtime(&now));
  const char* rank = std::getenv("RANK");
  char buf[256];
  std::snprintf(buf, sizeof(buf), "\n[ERROR] %s (PID:%d, Device:%d, RankID:%s) ERR%02d%03d %s %s", when,
                static_cast<int>(getpid()), static_cast<int>(t_current), rank ? rank : "-1", static_cast<int>(sub),
                static_cast<int>(code), subs[sub], text);
  return buf;
}

// ------------------------------------------------------------------------------------ streams
// torch_npu's stream ids (torch_npu/csrc/core/npu/NPUStream.cpp): bits 5+ name the class (0 default,
// 1 secondary, 2 sync-launch, 3 the normal-priority pool, 4 the high-priority pool), bits 0-4 the index in a
// pool of 32 (4 sync-launch streams); bit 30 marks an external stream (bits 0-29: its registration index).
// Pools come into being when a stream is first taken from them; an id naming a stream never handed out is
// rejected, as on the card. Each stream's "aclrtStream" handle is the stable address of its record; an
// external stream's handle is the one it wraps (emulated runtime streams: npurt_create / npurt_destroy).
// Work is synchronous on the emulator, so every stream is idle.
namespace streams {
enum Kind : int { kDefault = 0, kSecondary = 1, kSyncLaunch = 2, kNormal = 3, kHigh = 4 };
constexpr int kPoolBits = 5;
constexpr int kPoolSize = 1 << kPoolBits;
constexpr int kPriorities = 2;
constexpr int kSyncLaunchStreams = 4;
constexpr int64_t kExternalMarker = int64_t(1) << 30;

struct Record {  // what an emulated aclrtStream handle points at
  int64_t id = 0;
};
struct Device {
  Record default_, secondary, sync[kSyncLaunchStreams], pool[kPriorities][kPoolSize];
  std::atomic<bool> pool_ready[kPriorities] = {false, false};
  std::atomic<bool> sync_ready{false};
  std::atomic<uint32_t> counter[kPriorities] = {0, 0};
  std::atomic<uint32_t> sync_counter{0};
  std::vector<uintptr_t> external;  // guarded by g_mutex
};
Device g_dev[kMaxDevices];
std::mutex g_mutex;
std::unordered_set<uintptr_t> g_runtime;  // live handles made by npurt_create (guarded by g_mutex)
thread_local int64_t t_current_stream[kMaxDevices] = {};  // per device; 0: the default stream

// the guard's device for a stream (torch's autograd engine asks for every index below the guard's capacity)
c10::DeviceIndex device_of(c10::DeviceIndex idx) {
  if (idx < 0) return t_current;
  TORCH_CHECK(idx < kMaxDevices, "Invalid device_index: ", static_cast<int>(idx));
  return idx;
}

int64_t make_id(int kind, int64_t index) { return (static_cast<int64_t>(kind) << kPoolBits) | index; }
bool is_external(int64_t id) { return (static_cast<uint64_t>(id) & kExternalMarker) != 0; }
c10::Stream as_stream(int64_t id, c10::DeviceIndex dev) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, dev), id);
}

// the card's NPUStream_internals: the record behind (id, dev), or the card's error
uintptr_t handle(int64_t id, c10::DeviceIndex dev) {
  TORCH_CHECK(dev >= 0 && dev < kMaxDevices, "Invalid device_index: ", static_cast<int>(dev), ", valid range is [0, ",
              kMaxDevices, ")", card_error(kPTA, kErrValue));
  auto& d = g_dev[dev];
  const auto s = as_stream(id, dev);
  if (is_external(id)) {
    const auto index = static_cast<size_t>(static_cast<uint64_t>(id) & (kExternalMarker - 1));
    std::lock_guard<std::mutex> lock(g_mutex);
    TORCH_CHECK(index < d.external.size(), "Unrecognized external NPU stream ", s, card_error(kPTA, kErrParam));
    return d.external[index];
  }
  const auto kind = static_cast<uint8_t>(static_cast<uint32_t>(id) >> kPoolBits);
  const auto index = static_cast<size_t>(static_cast<uint32_t>(id) & (kPoolSize - 1));
  switch (kind) {
    case kDefault:
      TORCH_CHECK(index == 0, "Unrecognized stream ", s, " (I think this should be the default stream, but I got a "
                  "non-zero index ", index, "). Did you manufacture the StreamId yourself?  Don't do that; use the "
                  "official API like c10_npu::getStreamFromPool() to get a new stream.", card_error(kPTA, kErrParam));
      return reinterpret_cast<uintptr_t>(&d.default_);
    case kSecondary:
      return reinterpret_cast<uintptr_t>(&d.secondary);
    case kNormal:
    case kHigh:
      TORCH_CHECK(d.pool_ready[kind - kNormal].load(), "Uninitialized NPU stream ", s, " Did you manufacture the "
                  "StreamId yourself?  Don't do that; use the official API like c10_npu::getStreamFromPool() to get a "
                  "new stream.", card_error(kPTA, kErrParam));
      return reinterpret_cast<uintptr_t>(&d.pool[kind - kNormal][index]);
    case kSyncLaunch:
      TORCH_CHECK(index < kSyncLaunchStreams, "Invalid sync launch stream index ", index, " for NPU stream ", s,
                  " (pool size is ", kSyncLaunchStreams, ")", card_error(kPTA, kErrParam));
      TORCH_CHECK(d.sync_ready.load(), "Uninitialized sync launch NPU stream for device ", static_cast<int>(dev),
                  ", index ", index, card_error(kPTA, kErrParam));
      return reinterpret_cast<uintptr_t>(&d.sync[index]);
    default:
      TORCH_CHECK(false, "Unrecognized stream ", s, " (I didn't recognize the stream type, ", static_cast<int>(kind),
                  ")", card_error(kPTA, kErrParam));
  }
}

int64_t from_pool(c10::DeviceIndex dev, int priority) {  // getStreamFromPool: round robin over 32 per class
  const int p = std::clamp(-priority, 0, kPriorities - 1);
  auto& d = g_dev[dev];
  d.pool_ready[p].store(true);
  return make_id(kNormal + p, (d.counter[p]++) % kPoolSize);
}

int64_t sync_launch(c10::DeviceIndex dev) {
  auto& d = g_dev[dev];
  d.sync_ready.store(true);
  return make_id(kSyncLaunch, (d.sync_counter++) % kSyncLaunchStreams);
}

int64_t external(uintptr_t stream, c10::DeviceIndex dev) {  // getStreamFromExternal: one id per handle
  TORCH_CHECK(stream != 0, "External NPU stream does not support nullptr.", card_error(kPTA, kErrParam));
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& ext = g_dev[dev].external;
  for (size_t i = 0; i < ext.size(); ++i) {
    if (ext[i] == stream) return kExternalMarker | static_cast<int64_t>(i);
  }
  ext.push_back(stream);
  return kExternalMarker | static_cast<int64_t>(ext.size() - 1);
}

void check_not_external(int64_t id, const char* api) {
  TORCH_CHECK(!is_external(id), "External NPU stream is not supported in ", api,
              ". This path requires a torch_npu-managed stream.", card_error(kPTA, kErrNotSupport));
}

// npurt: the emulator's runtime streams (aclrtCreateStream / aclrtDestroyStream); 0 or ACL_ERROR_INVALID_PARAM
constexpr int kAclInvalidParam = 100000;
int npurt_create(uintptr_t out) {
  if (out == 0) return kAclInvalidParam;
  auto* r = new Record();
  std::lock_guard<std::mutex> lock(g_mutex);
  g_runtime.insert(reinterpret_cast<uintptr_t>(r));
  *reinterpret_cast<void**>(out) = r;
  return 0;
}
int npurt_destroy(uintptr_t stream) {
  if (stream == 0) return kAclInvalidParam;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_runtime.erase(stream) == 0) return kAclInvalidParam;
  delete reinterpret_cast<Record*>(stream);
  return 0;
}
}  // namespace streams

// ------------------------------------------------------------------------------------ events
// An event records the host clock (work is synchronous, so "recorded" is "completed").
struct EmuEvent {
  std::chrono::steady_clock::time_point when;
};

// ------------------------------------------------------------------------------------ guard
struct NpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNpu; }
  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kNpu, t_current); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kNpu, "expected a npu device, got ", d);
    select_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) t_current = d.index();
  }
  // streams and events: see the "streams" and "events" blocks above
  c10::Stream getStream(c10::Device d) const override {
    const auto dev = streams::device_of(d.index());
    return streams::as_stream(streams::t_current_stream[dev], dev);
  }
  c10::Stream getDefaultStream(c10::Device d) const override { return streams::as_stream(0, streams::device_of(d.index())); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high = false) const override {
    const auto dev = streams::device_of(d.index());
    return streams::as_stream(streams::from_pool(dev, high ? -1 : 0), dev);
  }
  c10::Stream getNewStream(c10::Device d, int priority = 0) const override {
    const auto dev = streams::device_of(d.index());
    return streams::as_stream(streams::from_pool(dev, priority), dev);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    const auto dev = streams::device_of(s.device_index());
    streams::handle(s.id(), dev);
    const auto old = streams::t_current_stream[dev];
    streams::t_current_stream[dev] = s.id();
    return streams::as_stream(old, dev);
  }
  void* getStreamNativeHandle(const c10::Stream s) const override {
    return reinterpret_cast<void*>(streams::handle(s.id(), s.device_index()));
  }
  c10::DeviceIndex deviceCount() const noexcept override { return static_cast<c10::DeviceIndex>(g_capacity.load()); }
  void record(void** event, const c10::Stream& s, const c10::DeviceIndex, const c10::EventFlag) const override {
    streams::check_not_external(s.id(), "NPUEvent::record");
    if (*event == nullptr) *event = new EmuEvent();
    static_cast<EmuEvent*>(*event)->when = std::chrono::steady_clock::now();
  }
  void block(void*, const c10::Stream& s) const override { streams::check_not_external(s.id(), "NPUEvent::block"); }
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override { delete static_cast<EmuEvent*>(event); }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start != nullptr && end != nullptr, "Both events must be recorded before calculating elapsed time.");
    const auto d = static_cast<EmuEvent*>(end)->when - static_cast<EmuEvent*>(start)->when;
    return std::chrono::duration<double, std::milli>(d).count();
  }
  bool queryStream(const c10::Stream& s) const override {
    TORCH_CHECK(!streams::is_external(s.id()), "Cannot query external NPU stream status. The caller must track stream "
                "completion externally.", card_error(kPTA, kErrNotSupport));
    streams::handle(s.id(), s.device_index());
    return true;
  }
  void synchronizeStream(const c10::Stream& s) const override {
    TORCH_CHECK(!streams::is_external(s.id()), "External NPU stream is not supported in NPUStream::synchronize. The "
                "caller is responsible for synchronization of external streams.", card_error(kPTA, kErrNotSupport));
    streams::handle(s.id(), s.device_index());
  }
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const c10::DeviceIndex) const override {}
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

NpuGuardImpl g_guard;

// ------------------------------------------------------------------------------------ generators
// A device-typed generator whose state is a host generator's (seeded differently: the device
// stream is not the CPU stream, as on a card).
struct NpuGeneratorImpl : public c10::GeneratorImpl {
  c10::intrusive_ptr<at::CPUGeneratorImpl> inner;
  uint64_t seed_;
  uint64_t offset_ = 0;
  explicit NpuGeneratorImpl(c10::DeviceIndex idx, uint64_t seed = c10::default_rng_seed_val)
      : c10::GeneratorImpl(c10::Device(kNpu, idx), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        inner(c10::make_intrusive<at::CPUGeneratorImpl>()) {
    set_current_seed(seed);
  }
  static uint64_t mix(uint64_t s) {  // splitmix64: a different stream from the host's for the same seed
    s += 0x9E3779B97F4A7C15ULL;
    s = (s ^ (s >> 30)) * 0xBF58476D1CE4E5B9ULL;
    s = (s ^ (s >> 27)) * 0x94D049BB133111EBULL;
    return s ^ (s >> 31);
  }
  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    inner->set_current_seed(mix(seed));
  }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    uint64_t s = c10::detail::getNonDeterministicRandom();
    set_current_seed(s);
    return s;
  }
  // The state starts with the card's layout (torch_npu's Philox generator: seed, then offset, 8 bytes each),
  // so `get_rng_state()[0]` is the seed's low byte as on the card; then the host generator's state that draws.
  // A 16-byte state from a card restores its seed and offset (the draws then follow this emulator's stream).
  static constexpr int64_t kCardBytes = 16;
  void set_state(const c10::TensorImpl& new_state) override {
    at::detail::check_rng_state(new_state);
    const int64_t n = new_state.numel();
    const auto host_bytes = inner->get_state()->numel();
    TORCH_CHECK(n == kCardBytes || n == kCardBytes + host_bytes, "RNG state is wrong size");
    const auto* p = static_cast<const uint8_t*>(new_state.data());
    uint64_t seed = 0, offset = 0;
    std::memcpy(&seed, p, 8);
    std::memcpy(&offset, p + 8, 8);
    set_current_seed(seed);
    offset_ = offset;
    if (n > kCardBytes) {
      at::Tensor host = at::empty({n - kCardBytes}, at::TensorOptions().dtype(at::kByte));
      std::memcpy(host.data_ptr(), p + kCardBytes, static_cast<size_t>(n - kCardBytes));
      inner->set_state(*host.unsafeGetTensorImpl());
    }
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    auto host = inner->get_state();
    at::Tensor out = at::empty({kCardBytes + host->numel()}, at::TensorOptions().dtype(at::kByte));
    auto* p = static_cast<uint8_t*>(out.data_ptr());
    std::memcpy(p, &seed_, 8);
    std::memcpy(p + 8, &offset_, 8);
    std::memcpy(p + kCardBytes, host->data(), static_cast<size_t>(host->numel()));
    return out.getIntrusivePtr();
  }
  static c10::DeviceType device_type() { return kNpu; }

 private:
  NpuGeneratorImpl* clone_impl() const override {
    auto* g = new NpuGeneratorImpl(device().index(), seed_);
    g->offset_ = offset_;
    g->inner = c10::make_intrusive<at::CPUGeneratorImpl>();
    g->inner->set_state(*inner->get_state());
    return g;
  }
};

at::Generator make_generator(c10::DeviceIndex idx) {
  if (idx < 0) idx = t_current;
  return at::make_generator<NpuGeneratorImpl>(idx);
}

std::mutex g_gen_mutex;
std::vector<at::Generator> g_default_generators;

const at::Generator& default_generator(c10::DeviceIndex idx) {
  if (idx < 0) idx = t_current;
  std::lock_guard<std::mutex> lock(g_gen_mutex);
  while (static_cast<int>(g_default_generators.size()) <= idx) {
    g_default_generators.push_back(make_generator(static_cast<c10::DeviceIndex>(g_default_generators.size())));
  }
  return g_default_generators[idx];
}

at::Generator host_generator_of(const at::Generator& g) {
  auto* impl = dynamic_cast<NpuGeneratorImpl*>(g.unsafeGetGeneratorImpl());
  TORCH_CHECK(impl != nullptr, "not an npu generator");
  return at::Generator(impl->inner);
}

// ------------------------------------------------------------------------------------ hooks
struct NpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return g_available.load(); }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return g_available.load(); }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override { return g_available.load() ? g_devices.load() : 0; }
  void setCurrentDevice(c10::DeviceIndex d) const override { select_device(d); }
  c10::DeviceIndex getCurrentDevice() const override { return t_current; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    auto old = t_current;
    select_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  bool isPinnedPtr(const void* p) const override { return is_pinned_ptr(p); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &g_pinned_alloc; }
  c10::Device getDeviceFromPtr(void*) const override { return c10::Device(kNpu, t_current); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex idx) const override { return default_generator(idx); }
  at::Generator getNewGenerator(c10::DeviceIndex idx = -1) const override { return make_generator(idx); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    auto* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    c10::DeviceGuard guard(impl->device());
    at::DataPtr fresh = g_alloc.allocate(newsize);
    const size_t keep = std::min(newsize, impl->nbytes());
    if (keep && impl->data()) std::memcpy(fresh.get(), impl->data(), keep);
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }
};

// ------------------------------------------------------------------------------------ python hooks
enum OpBits : int { kWarnFallback = 1, kUpcast = 2, kPost = 4, kAllowHost = 8, kPre = 16, kContiguous = 32 };
std::mutex g_ops_mutex;
std::unordered_map<const c10::FunctionSchema*, int> g_op_bits;
py::object* g_classify = nullptr;  // (name, overload) -> bits
py::object* g_on_fallback = nullptr;  // (name) -> None: warn + count
py::object* g_post = nullptr;  // (name, outputs: list[cpu tensor], mutated: list[cpu tensor]) -> None
py::object* g_pre = nullptr;  // (name, args: list[cpu tensor | None]) -> [(position, replacement)] (_numerics.py)

int op_bits(const c10::OperatorHandle& op) {
  const c10::FunctionSchema* key = &op.schema();
  {
    std::lock_guard<std::mutex> lock(g_ops_mutex);
    auto it = g_op_bits.find(key);
    if (it != g_op_bits.end()) return it->second;
  }
  int bits = 0;
  if (g_classify != nullptr) {
    py::gil_scoped_acquire gil;
    bits = (*g_classify)(op.schema().name(), op.schema().overload_name()).cast<int>();
  }
  std::lock_guard<std::mutex> lock(g_ops_mutex);
  g_op_bits[key] = bits;
  return bits;
}

// ------------------------------------------------------------------------------------ fallback
struct StorageMap {
  c10::StorageImpl* npu_impl;
  c10::Storage npu;
  c10::Storage host;
  const void* data;
  size_t nbytes;
};

[[noreturn]] void placement_error(const c10::OperatorHandle& op, const std::string& a, const std::string& b) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", a, " and ", b,
              "! (when checking arguments for ", op.schema().name(), ")");
}

bool is_generator_type(const c10::TypePtr& t) {
  if (t->kind() == c10::TypeKind::GeneratorType) return true;
  if (t->kind() == c10::TypeKind::OptionalType) {
    return t->containedType(0)->kind() == c10::TypeKind::GeneratorType;
  }
  return false;
}

// Run `op`'s CPU kernel on the host aliases of the npu arguments on `stack`; results re-tagged as npu.
void run_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  check_installed(op.schema().name().c_str());
  const auto& schema = op.schema();
  const auto& args = schema.arguments();
  const size_t n_args = args.size();
  const size_t base = stack->size() - n_args;
  const int bits = op_bits(op);

  std::vector<StorageMap> maps;
  maps.reserve(4);
  struct Mutated {
    at::Tensor npu;
    at::Tensor host;
  };
  std::vector<Mutated> mutated;
  c10::DeviceIndex dev = -1, target = -1;
  bool host_tensor = false;
  std::string host_device;

  auto alias = [&](const at::Tensor& t) -> at::Tensor {
    auto* si = t.storage().unsafeGetStorageImpl();
    for (auto& m : maps) {
      if (m.npu_impl == si) return tensor_on(m.host, c10::DispatchKey::CPU, t);
    }
    c10::Storage host = host_view(t.storage());
    maps.push_back({si, t.storage(), host, si->mutable_data(), si->nbytes()});
    return tensor_on(host, c10::DispatchKey::CPU, t);
  };
  auto note = [&](const at::Tensor& t) {
    const auto i = t.device().index();
    if (dev < 0) {
      dev = i;
    } else if (dev != i) {
      placement_error(op, "npu:" + std::to_string(dev), "npu:" + std::to_string(i));
    }
  };
  auto note_host = [&](const at::Tensor& t) {
    if (t.dim() > 0 && !host_tensor) {
      host_tensor = true;
      host_device = t.device().str();
    }
  };

  for (size_t i = 0; i < n_args; ++i) {
    auto& iv = (*stack)[base + i];
    if (iv.isTensor()) {
      const at::Tensor& t = iv.toTensor();
      if (!t.defined()) continue;
      if (t.device().type() == kNpu) {
        note(t);
        at::Tensor a = alias(t);
        const auto* ai = args[i].alias_info();
        if (ai != nullptr && ai->isWrite()) mutated.push_back({t, a});
        iv = std::move(a);
      } else {
        note_host(t);
      }
    } else if (iv.isTensorList()) {
      auto list = iv.toTensorList();
      bool any = false;
      for (const at::Tensor& t : list) {
        if (t.defined() && t.device().type() == kNpu) any = true;
      }
      if (!any) continue;
      c10::List<at::Tensor> out;
      out.reserve(list.size());
      for (const at::Tensor& t : list) {
        if (t.defined() && t.device().type() == kNpu) {
          note(t);
          out.push_back(alias(t));
        } else {
          if (t.defined()) note_host(t);
          out.push_back(t);
        }
      }
      iv = out;
    } else if (iv.isList()) {
      auto list = iv.toList();
      bool any = false;
      for (const c10::IValue& e : list) {
        if (e.isTensor() && e.toTensor().defined() && e.toTensor().device().type() == kNpu) any = true;
      }
      if (!any) continue;
      c10::impl::GenericList out(list.elementType());
      out.reserve(list.size());
      for (const c10::IValue& e : list) {
        if (e.isTensor() && e.toTensor().defined() && e.toTensor().device().type() == kNpu) {
          note(e.toTensor());
          out.push_back(alias(e.toTensor()));
        } else {
          if (e.isTensor() && e.toTensor().defined()) note_host(e.toTensor());
          out.push_back(e);
        }
      }
      iv = out;
    } else if (iv.isDevice()) {
      const auto d = iv.toDevice();
      if (d.type() == kNpu) {
        target = checked_index(d.has_index() ? d.index() : -1);
        iv = c10::Device(c10::kCPU);
      }
    }
  }
  if (host_tensor && dev >= 0 && !(bits & kAllowHost)) {
    placement_error(op, "npu:" + std::to_string(dev), host_device);
  }
  const c10::DeviceIndex out_dev = target >= 0 ? target : (dev >= 0 ? dev : t_current);

  // the device RNG: an npu generator (or none: the device's default) draws through its host generator
  for (size_t i = 0; i < n_args; ++i) {
    if (!is_generator_type(args[i].type())) continue;
    auto& iv = (*stack)[base + i];
    if (iv.isNone()) {
      iv = host_generator_of(default_generator(out_dev));
    } else if (iv.isGenerator() && iv.toGenerator().device().type() == kNpu) {
      iv = host_generator_of(iv.toGenerator());
    }
  }

  // float16/bfloat16 matmuls and convolutions: the host has no fast kernels; the NPU's cube unit
  // accumulates in fp32 anyway, so run in fp32 and round the results to the low precision
  c10::optional<at::ScalarType> low;
  std::vector<std::pair<at::Tensor, at::Tensor>> widened;  // (low-precision out= alias, its fp32 stand-in)
  if (bits & kUpcast) {
    bool mixed = false;
    for (size_t i = 0; i < n_args; ++i) {
      const auto& iv = (*stack)[base + i];
      if (!iv.isTensor() || !iv.toTensor().defined() || !iv.toTensor().is_floating_point()) continue;
      const auto st = iv.toTensor().scalar_type();
      if ((st != at::kHalf && st != at::kBFloat16) || (low.has_value() && *low != st)) mixed = true;
      low = st;
    }
    if (mixed) low.reset();
    if (low.has_value()) {
      for (size_t i = 0; i < n_args; ++i) {
        auto& iv = (*stack)[base + i];
        if (iv.isTensor() && iv.toTensor().defined() && iv.toTensor().scalar_type() == *low) {
          at::Tensor wide = iv.toTensor().to(at::kFloat);
          const auto* ai = args[i].alias_info();
          if (ai != nullptr && ai->isWrite()) widened.emplace_back(iv.toTensor(), wide);  // out=: copied back
          iv = std::move(wide);
        }
      }
    }
  }

  // the card's numerics (_numerics.py): operands replaced before the host kernel reads them
  if ((bits & kPre) && !low.has_value() && g_pre != nullptr) {
    py::gil_scoped_acquire gil;
    py::list ins;
    for (size_t i = 0; i < n_args; ++i) {
      const auto& iv = (*stack)[base + i];
      if (iv.isTensor() && iv.toTensor().defined()) {
        ins.append(py::cast(iv.toTensor()));
      } else {
        ins.append(py::none());
      }
    }
    for (const auto& item : (*g_pre)(schema.name(), ins)) {
      auto pair = item.cast<py::tuple>();
      (*stack)[base + pair[0].cast<size_t>()] = pair[1].cast<at::Tensor>();
    }
  }

  if (bits & kWarnFallback && g_on_fallback != nullptr) {
    py::gil_scoped_acquire gil;
    (*g_on_fallback)(schema.name());
  }

  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);

  const size_t n_rets = schema.returns().size();
  const size_t rbase = stack->size() - n_rets;

  if (low.has_value()) {
    for (auto& w : widened) {  // out= arguments: the fp32 result rounded into the caller's tensor
      if (w.first.sizes() != w.second.sizes()) w.first.resize_(w.second.sizes());
      w.first.copy_(w.second);
    }
    for (size_t i = 0; i < n_rets; ++i) {
      auto& iv = (*stack)[rbase + i];
      if (!iv.isTensor() || !iv.toTensor().defined() || !iv.toTensor().is_floating_point()) continue;
      bool was_out = false;
      for (auto& w : widened) {
        if (iv.toTensor().unsafeGetTensorImpl() == w.second.unsafeGetTensorImpl()) {
          iv = w.first;
          was_out = true;
          break;
        }
      }
      if (!was_out) iv = iv.toTensor().to(*low);
    }
  }

  if ((bits & kPost) && g_post != nullptr) {
    py::gil_scoped_acquire gil;
    py::list outs, muts;
    for (size_t i = 0; i < n_rets; ++i) {
      const auto& iv = (*stack)[rbase + i];
      if (iv.isTensor()) {
        outs.append(py::cast(iv.toTensor()));
      } else if (iv.isTensorList()) {
        for (const at::Tensor& t : iv.toTensorList()) outs.append(py::cast(t));
      }
    }
    for (const auto& m : mutated) muts.append(py::cast(m.host));
    (*g_post)(schema.name(), outs, muts);
  }

  // writes that replaced an input's bytes (resize_ to a larger size, out= arguments): adopt them
  for (auto& m : maps) {
    auto* hi = m.host.unsafeGetStorageImpl();
    if (hi->data() != m.data || hi->nbytes() != m.nbytes) {
      adopt_into(m.npu_impl, m.host);
      m.data = hi->data();
    }
  }
  // mutated arguments whose sizes/strides/storage changed (resize, out=, set_)
  std::vector<std::pair<c10::StorageImpl*, c10::Storage>> fresh;
  auto npu_storage_for = [&](const c10::Storage& host) -> c10::Storage {
    auto* si = host.unsafeGetStorageImpl();
    for (auto& m : maps) {
      if (m.host.unsafeGetStorageImpl() == si) return m.npu;
    }
    for (auto& f : fresh) {
      if (f.first == si) return f.second;
    }
    c10::Storage s = adopt_storage(host, out_dev);
    fresh.emplace_back(si, s);
    return s;
  };
  for (auto& m : mutated) {
    auto* ni = m.npu.unsafeGetTensorImpl();
    auto* hi = m.host.unsafeGetTensorImpl();
    if (m.host.storage().unsafeGetStorageImpl() != m.npu.storage().unsafeGetStorageImpl()) {
      bool same = false;
      for (auto& s : maps) {
        if (s.npu_impl == m.npu.storage().unsafeGetStorageImpl() &&
            s.host.unsafeGetStorageImpl() == m.host.storage().unsafeGetStorageImpl()) {
          same = true;
        }
      }
      if (!same) ni->set_storage_keep_dtype(npu_storage_for(m.host.storage()));
    }
    if (ni->sizes() != hi->sizes() || ni->strides() != hi->strides() || ni->storage_offset() != hi->storage_offset()) {
      ni->set_sizes_and_strides(hi->sizes(), hi->strides(), hi->storage_offset());
    }
  }

  auto convert = [&](const at::Tensor& r) -> at::Tensor {
    if (!r.defined() || r.device().type() != c10::kCPU) return r;
    for (auto& m : mutated) {
      if (r.unsafeGetTensorImpl() == m.host.unsafeGetTensorImpl()) return m.npu;
    }
    // the card's kernels allocate their results contiguous (_card_rules.py): a fresh strided host result is
    // compacted; results over an input's bytes, and dense channels_last results (the layout the caller asked
    // for with .to(memory_format=), kept as the CPU keeps it: an assumption, see _card_rules.py), keep theirs
    if ((bits & kContiguous) && r.layout() == at::kStrided && !r.is_contiguous() &&
        !r.is_contiguous(at::MemoryFormat::ChannelsLast) && !r.is_contiguous(at::MemoryFormat::ChannelsLast3d)) {
      bool fresh = true;
      for (auto& m : maps) {
        if (m.host.unsafeGetStorageImpl() == r.storage().unsafeGetStorageImpl()) fresh = false;
      }
      if (fresh) {
        at::Tensor c = r.contiguous();
        return tensor_on(npu_storage_for(c.storage()), kNpuKey, c);
      }
    }
    return tensor_on(npu_storage_for(r.storage()), kNpuKey, r);
  };
  for (size_t i = 0; i < n_rets; ++i) {
    auto& iv = (*stack)[rbase + i];
    if (iv.isTensor()) {
      iv = convert(iv.toTensor());
    } else if (iv.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : iv.toTensorList()) out.push_back(convert(t));
      iv = out;
    }
  }
}

void npu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) { run_on_host(op, stack); }

// ------------------------------------------------------------------------------------ kernels
// torch sends convolutions of backends other than CPU/CUDA to convolution_overrideable; run them as
// the host's aten::convolution (and its backward), through the same host path as every other op.
at::Tensor npu_convolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                           at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                           at::IntArrayRef output_padding, int64_t groups) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution", "");
  torch::jit::Stack stack{input, weight, bias, stride.vec(), padding.vec(), dilation.vec(), transposed,
                          output_padding.vec(), groups};
  run_on_host(op, &stack);
  return stack[0].toTensor();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution_backward", "");
  c10::IValue bias_sizes;
  if (output_mask[2]) bias_sizes = std::vector<int64_t>{grad_output.size(1)};
  torch::jit::Stack stack{grad_output, input, weight, bias_sizes, stride.vec(), padding.vec(), dilation.vec(),
                          transposed, output_padding.vec(), groups,
                          std::vector<bool>{output_mask[0], output_mask[1], output_mask[2]}};
  run_on_host(op, &stack);
  return {stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor()};
}

at::Tensor npu_empty(at::IntArrayRef size, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                     std::optional<at::Device> device, std::optional<bool> pin_memory,
                     std::optional<at::MemoryFormat> memory_format) {
  check_installed("aten::empty");
  const auto idx = checked_index(device.has_value() ? device->index() : -1);
  c10::DeviceGuard guard(c10::Device(kNpu, idx));
  return at::detail::empty_generic(size, &g_alloc, c10::DispatchKeySet(kNpuKey), c10::dtype_or_default(dtype),
                                   memory_format);
}

at::Tensor npu_empty_strided(at::IntArrayRef size, at::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                             std::optional<at::Layout> layout, std::optional<at::Device> device,
                             std::optional<bool> pin_memory) {
  check_installed("aten::empty_strided");
  const auto idx = checked_index(device.has_value() ? device->index() : -1);
  c10::DeviceGuard guard(c10::Device(kNpu, idx));
  return at::detail::empty_strided_generic(size, stride, &g_alloc, c10::DispatchKeySet(kNpuKey),
                                           c10::dtype_or_default(dtype));
}

at::Tensor as_host(const at::Tensor& t) { return t.device().type() == kNpu ? host_alias(t) : t; }

at::Tensor npu_copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  check_installed("aten::_copy_from");
  at::Tensor d = as_host(dst);
  d.copy_(as_host(self));
  return dst;
}

at::Tensor npu_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return npu_copy_from(self, dst, false);
}

const at::Tensor& npu_resize_(const at::Tensor& self, at::IntArrayRef size,
                              std::optional<at::MemoryFormat> memory_format) {
  c10::DeviceGuard guard(self.device());
  return at::native::resize_(self, size, memory_format);
}

at::Tensor& npu_set_storage(at::Tensor& self, at::Storage source, int64_t offset, at::IntArrayRef size,
                            at::IntArrayRef stride) {
  c10::DeviceGuard guard(self.device());
  return at::native::set_storage_cpu_(self, std::move(source), offset, size, stride);
}

at::Tensor& npu_set_empty(at::Tensor& self) {
  c10::DeviceGuard guard(self.device());
  c10::Storage empty(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), 0,
                                                           g_alloc.allocate(0), &g_alloc, true));
  return at::native::set_storage_cpu_(self, std::move(empty), 0, {0}, {});
}

at::Scalar npu_local_scalar_dense(const at::Tensor& self) {
  check_installed("aten::_local_scalar_dense");
  return at::native::_local_scalar_dense_cpu(host_alias(self));
}

void npu_record_stream(at::Tensor& self, at::Stream s) {  // synchronous device: nothing to track
  streams::check_not_external(s.id(), "record_stream");
  streams::handle(s.id(), s.device_index());
}

// torch_npu's contiguous (aten/common/TensorProperties.cpp): a tensor already contiguous in the format is
// returned as is; otherwise the card copies only to the plain contiguous format (channels_last and
// preserve_format are rejected). Registered for autograd too, so gradients flow through the clone.
at::Tensor npu_contiguous(const at::Tensor& self, at::MemoryFormat memory_format) {
  if (self.is_contiguous(memory_format)) return self;
  TORCH_CHECK(memory_format == at::MemoryFormat::Contiguous,
              "NPU contiguous operator only supported contiguous memory format.", card_error(kOPS, kErrNotSupport));
  return self.clone(memory_format);
}

bool npu_is_pinned(const at::Tensor& self, std::optional<at::Device> device) { return false; }

at::Tensor npu_pin_memory(const at::Tensor& self, std::optional<at::Device> device) {
  TORCH_CHECK(false, "cannot pin '", self.device(), "' memory: only dense CPU tensors can be pinned");
}

std::tuple<at::Tensor, at::Tensor> npu_native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  auto bool_opts = input.options().dtype(at::kBool);
  if ((train.has_value() && !*train) || p == 0.0) {
    return {input.clone(), at::ones_like(input, bool_opts)};
  }
  if (p >= 1.0) return {at::zeros_like(input), at::zeros_like(input, bool_opts)};
  at::Tensor mask = at::empty_like(input, bool_opts);
  mask.bernoulli_(1.0 - p);  // the device generator (see the fallback)
  return {input * mask * (1.0 / (1.0 - p)), mask};
}

// The card has no float64 arithmetic: a dtype-only cast of an npu tensor to float64 (x.double(),
// x.to(torch.float64)) gives float32, with torch_npu's warning (ToKernelNpu.cpp); device moves keep it.
at::Tensor npu_to_copy(const at::Tensor& self, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                       std::optional<at::Device> device, std::optional<bool> pin_memory, bool non_blocking,
                       std::optional<at::MemoryFormat> memory_format) {
  if (dtype.has_value() && !layout.has_value() && !device.has_value() && self.scalar_type() != *dtype &&
      *dtype == at::kDouble) {
    TORCH_WARN_ONCE("Device do not support double dtype now, dtype cast replace with float.");
    dtype = at::kFloat;
  }
  return at::native::_to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format);
}

bool npu_compatible_shallow_copy(const at::Tensor& self, const at::Tensor& from) {
  // torch keeps a Parameter object across .to(device) when the two tensor types are compatible;
  // its list of dense backends lacks PrivateUse1, so npu <-> cpu would look incompatible
  auto dense = [](const at::Tensor& t) {
    return t.layout() == at::kStrided && (t.device().type() == kNpu || t.device().type() == c10::kCPU) &&
           !t.is_quantized() && !t.is_mkldnn();
  };
  if (dense(self) && dense(from)) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

// registered once, for the life of the process (like the guard and hooks): after uninstall they refuse
// to run ("the emulated NPU was uninstalled") instead of vanishing
std::unique_ptr<torch::Library> g_kernels, g_autograd_kernels, g_fallback_lib;

void register_kernels() {
  if (g_kernels) return;
  g_kernels = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", std::optional<c10::DispatchKey>(kNpuKey),
                                               __FILE__, __LINE__);
  auto& m = *g_kernels;
  m.impl("empty.memory_format", TORCH_FN(npu_empty));
  m.impl("empty_strided", TORCH_FN(npu_empty_strided));
  m.impl("_copy_from", TORCH_FN(npu_copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(npu_copy_from_and_resize));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
  m.impl("resize_", TORCH_FN(npu_resize_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(npu_set_storage));
  m.impl("set_.source_Storage", TORCH_FN(at::native::set_));
  m.impl("set_.source_Tensor", TORCH_FN(at::native::set_tensor_));
  m.impl("convolution_overrideable", TORCH_FN(npu_convolution));
  m.impl("convolution_backward_overrideable", TORCH_FN(npu_convolution_backward));
  m.impl("set_", TORCH_FN(npu_set_empty));
  m.impl("_local_scalar_dense", TORCH_FN(npu_local_scalar_dense));
  m.impl("record_stream", TORCH_FN(npu_record_stream));
  m.impl("is_pinned", TORCH_FN(npu_is_pinned));
  m.impl("_pin_memory", TORCH_FN(npu_pin_memory));
  m.impl("native_dropout", TORCH_FN(npu_native_dropout));
  m.impl("_to_copy", TORCH_FN(npu_to_copy));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(npu_compatible_shallow_copy));
  m.impl("contiguous", TORCH_FN(npu_contiguous));
  g_autograd_kernels = std::make_unique<torch::Library>(
      torch::Library::IMPL, "aten", std::optional<c10::DispatchKey>(c10::DispatchKey::AutogradPrivateUse1), __FILE__,
      __LINE__);
  g_autograd_kernels->impl("contiguous", TORCH_FN(npu_contiguous));
  g_fallback_lib = std::make_unique<torch::Library>(torch::Library::IMPL, "_", std::optional<c10::DispatchKey>(kNpuKey),
                                                    __FILE__, __LINE__);
  g_fallback_lib->fallback(torch::CppFunction::makeFromBoxedFunction<&npu_fallback>());
}

// operators torch_npu has an NPU kernel for whose PrivateUse1 slot would otherwise take torch's
// CompositeExplicitAutograd(NonFunctional) kernel (a decomposition, or an out= wrapper that lays the result out
// like the CPU): they run the CPU kernel through the fallback instead (_card_rules.host_kernel_ops). Once per process.
std::unique_ptr<torch::Library> g_host_kernels;

int register_host_kernels(const std::vector<std::string>& names) {
  if (g_host_kernels) return 0;
  g_host_kernels = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                                    std::optional<c10::DispatchKey>(kNpuKey), __FILE__, __LINE__);
  for (const auto& name : names) {
    g_host_kernels->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&npu_fallback>());
  }
  return static_cast<int>(names.size());
}

std::once_flag g_guard_registered;
std::once_flag g_hooks_registered;

void register_guard(int capacity) {
  if (capacity > g_capacity.load()) g_capacity.store(capacity);
  std::call_once(g_guard_registered, [] { static c10::impl::DeviceGuardImplRegistrar reg(kNpu, &g_guard); });
}

void register_hooks() {
  std::call_once(g_hooks_registered, [] {
    at::RegisterPrivateUse1HooksInterface(new NpuHooks());
    c10::SetAllocator(kNpu, &g_alloc);
  });
}

void set_py(py::object*& slot, py::object fn) {
  delete slot;
  slot = fn.is_none() ? nullptr : new py::object(std::move(fn));
  std::lock_guard<std::mutex> lock(g_ops_mutex);
  g_op_bits.clear();
}

}  // namespace

// ------------------------------------------------------------------------------------ process model: autocast cast cache, lazy init after fork
// Kept apart from the rest (one function, one call in the module init) so parallel work on this file merges.
#include <ATen/autocast_mode.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/device_lazy_init.h>

namespace {

void register_process_bindings(py::module& m) {
  // torch's own autocast cast (at::autocast::cached_cast), as torch_npu's KERNEL_PRIVATEUSEONE kernels call it:
  // one weight cast per autocast region in the global cache torch.clear_autocast_cache() empties, no caching
  // when the cache is off or the tensor is a torch._C._add_cached_tensor one.
  m.def("autocast_cached_cast", [](const at::Tensor& t, py::object dtype) {
    TORCH_CHECK(THPDtype_Check(dtype.ptr()), "autocast_cached_cast: expected a torch.dtype");
    return at::autocast::cached_cast(reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type, t, c10::DeviceType::PrivateUse1);
  });
  // torch calls torch.npu._lazy_init() on the first npu tensor of a process and then never again; after a fork
  // (or when the emulator's own start-up probe must not count as the user's first use) it has to ask again.
  m.def("set_requires_device_init", [](bool value) {
    torch::utils::set_requires_device_init(c10::DeviceType::PrivateUse1, value);
  });
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  register_process_bindings(m);
  m.def("register_guard", &register_guard, "register the npu device guard (sized for `capacity` devices)");
  m.def("register_hooks", &register_hooks, "register the npu accelerator hooks and the device allocator");
  m.def("register_kernels", &register_kernels, "register the npu kernels and the CPU fallback");
  m.def("register_host_kernels", &register_host_kernels,
        "route these aten operators (name.overload) to the CPU fallback at PrivateUse1 (once per process)");
  m.def("set_available", [](bool on, int devices) {
    TORCH_CHECK(devices <= kMaxDevices, "at most ", kMaxDevices, " emulated devices");
    g_devices.store(static_cast<c10::DeviceIndex>(on ? devices : 0));
    g_available.store(on);
  });
  m.def("set_hooks", [](py::object classify, py::object on_fallback, py::object post) {
    set_py(g_classify, std::move(classify));
    set_py(g_on_fallback, std::move(on_fallback));
    set_py(g_post, std::move(post));
  });
  m.def("set_pre_hook", [](py::object pre) { set_py(g_pre, std::move(pre)); });
  m.def("reset_op_cache", [] {
    std::lock_guard<std::mutex> lock(g_ops_mutex);
    g_op_bits.clear();
  });
  m.def("default_generator", [](int idx) {
    return py::reinterpret_steal<py::object>(THPGenerator_Wrap(default_generator(static_cast<c10::DeviceIndex>(idx))));
  });
  m.def("capacity", [] { return g_capacity.load(); });
  m.def("current_device", [] { return static_cast<int>(t_current); });
  m.def("set_device", [](int idx) { t_current = static_cast<c10::DeviceIndex>(idx); });
  m.def("host_generator", [](py::object gen) {
    auto g = THPGenerator_Unwrap(gen.ptr());
    return py::reinterpret_steal<py::object>(THPGenerator_Wrap(host_generator_of(g)));
  });
  m.def("new_generator", [](int idx) {
    return py::reinterpret_steal<py::object>(THPGenerator_Wrap(make_generator(static_cast<c10::DeviceIndex>(idx))));
  });
  m.def("host_alias", [](const at::Tensor& t) {
    TORCH_CHECK(t.device().type() == kNpu, "host_alias: expected an npu tensor, got ", t.device());
    return host_tensor(t);
  }, "the host (CPU) tensor over an npu tensor's bytes (no copy)");
  m.def("adopt_into", [](const at::Tensor& npu, const at::Tensor& host) {
    TORCH_CHECK(npu.device().type() == kNpu && host.device().type() == c10::kCPU, "adopt_into(npu, cpu)");
    adopt_into(npu.storage().unsafeGetStorageImpl(), host.storage());
  }, "the npu tensor's storage takes over a host tensor's bytes (no copy)");
  m.def("adopt", [](const at::Tensor& t, int idx) {
    TORCH_CHECK(t.device().type() == c10::kCPU, "adopt: expected a CPU tensor, got ", t.device());
    return tensor_on(adopt_storage(t.storage(), checked_index(static_cast<c10::DeviceIndex>(idx))), kNpuKey, t);
  }, "an npu tensor over a CPU tensor's bytes (no copy)");
  // streams (torch_npu's ids; see the "streams" block)
  m.def("stream_new", [](int idx, int priority) { return streams::from_pool(checked_index(idx), priority); });
  m.def("stream_sync_launch", [](int idx) { return streams::sync_launch(checked_index(idx)); });
  m.def("stream_external", [](uintptr_t handle, int idx) { return streams::external(handle, checked_index(idx)); });
  m.def("stream_handle", [](int64_t id, int idx) { return streams::handle(id, static_cast<c10::DeviceIndex>(idx)); },
        "the stream's handle (its aclrtStream); the card's error for an id it never handed out");
  m.def("stream_current", [](int idx) { return streams::t_current_stream[checked_index(idx)]; });
  m.def("stream_set", [](int64_t id, int idx) {
    const auto dev = checked_index(idx);
    streams::handle(id, dev);
    streams::t_current_stream[dev] = id;
  });
  m.def("stream_check_not_external", &streams::check_not_external);
  m.def("npurt_stream_create", &streams::npurt_create, "aclrtCreateStream into the pointer at `out`");
  m.def("npurt_stream_destroy", &streams::npurt_destroy, "aclrtDestroyStream");
  m.def("card_error", [](int sub, int code) { return card_error(static_cast<CardSub>(sub), static_cast<CardErr>(code)); },
        "torch_npu's error suffix (ERR<sub><code> ...)");
  m.def("memory_stats", [](int idx) {
    // torch_npu's _npu_memoryStats layout, from the one DeviceStats torch.accelerator reads too
    const auto st = g_alloc.getDeviceStats(static_cast<c10::DeviceIndex>(idx));
    auto stat = [](const c10::CachingAllocator::Stat& s) {
      py::dict d;
      d["current"] = s.current;
      d["peak"] = s.peak;
      d["allocated"] = s.allocated;
      d["freed"] = s.freed;
      return d;
    };
    auto arr = [&](const c10::CachingAllocator::StatArray& a) {
      py::dict d;
      d["all"] = stat(a[0]);
      d["small_pool"] = stat(a[1]);
      d["large_pool"] = stat(a[2]);
      return d;
    };
    py::dict r;
    r["num_alloc_retries"] = st.num_alloc_retries;
    r["num_ooms"] = st.num_ooms;
    r["max_split_size"] = st.max_split_size;
    r["num_sync_all_streams"] = st.num_sync_all_streams;
    r["num_device_alloc"] = st.num_device_alloc;
    r["num_device_free"] = st.num_device_free;
    r["num_oom_rejections"] = st.num_oom_rejections;
    r["allocation"] = arr(st.allocation);
    r["segment"] = arr(st.segment);
    r["active"] = arr(st.active);
    r["inactive_split"] = arr(st.inactive_split);
    r["allocated_bytes"] = arr(st.allocated_bytes);
    r["reserved_bytes"] = arr(st.reserved_bytes);
    r["active_bytes"] = arr(st.active_bytes);
    r["inactive_split_bytes"] = arr(st.inactive_split_bytes);
    r["requested_bytes"] = arr(st.requested_bytes);
    r["oversize_allocations"] = stat(st.oversize_allocations);
    r["oversize_segments"] = stat(st.oversize_segments);
    return r;
  }, "torch_npu's memory_stats (nested) for one device");
  m.def("memory_snapshot", [] {
    // one segment per live block (nothing is cached), in torch's snapshot layout
    std::lock_guard<std::mutex> lock(g_mem_mutex);
    py::list out;
    for (int d = 0; d < kMaxDevices; ++d) {
      for (const MemCtx* c : g_mem[d].live) {
        py::dict block;
        block["address"] = reinterpret_cast<uintptr_t>(c->ptr);
        block["size"] = c->size;
        block["requested_size"] = c->requested;
        block["state"] = "active_allocated";
        py::dict seg;
        seg["device"] = d;
        seg["address"] = reinterpret_cast<uintptr_t>(c->ptr);
        seg["total_size"] = c->size;
        seg["allocated_size"] = c->size;
        seg["active_size"] = c->size;
        seg["requested_size"] = c->requested;
        seg["stream"] = 0;
        seg["segment_type"] = c->size <= kSmallSize ? "small" : "large";
        seg["blocks"] = py::list(py::make_tuple(block));
        out.append(seg);
      }
    }
    return out;
  }, "the live device blocks, as torch.npu.memory_snapshot() lists segments");
  m.def("reset_peak", [](int idx) { g_alloc.resetPeakStats(static_cast<c10::DeviceIndex>(idx)); });
  m.def("reset_accumulated", [](int idx) { g_alloc.resetAccumulatedStats(static_cast<c10::DeviceIndex>(idx)); });
  m.def("mem_get_info", [](int idx) { return g_alloc.getMemoryInfo(static_cast<c10::DeviceIndex>(idx)); });
  m.def("total_memory", [] { return kTotalMemory; }, "bytes of memory of one emulated card");
  m.def("set_memory_fraction", [](int idx, double fraction) {
    ensure_alloc_conf();
    std::lock_guard<std::mutex> lock(g_mem_mutex);
    g_mem[checked_index(static_cast<c10::DeviceIndex>(idx))].limit =
        static_cast<int64_t>(fraction * static_cast<double>(kTotalMemory));
  }, "limit the device to `fraction` of its memory (allocations beyond raise torch.OutOfMemoryError)");
  m.def("memory_fraction", [](int idx) {
    ensure_alloc_conf();
    std::lock_guard<std::mutex> lock(g_mem_mutex);
    return static_cast<double>(g_mem[checked_index(static_cast<c10::DeviceIndex>(idx))].limit) /
           static_cast<double>(kTotalMemory);
  });
  m.def("host_empty_cache", &pinned_empty_cache, "release the cached pinned host blocks");
  m.def("reload_alloc_conf", [] {
    g_conf_done.store(false);
    g_conf_armed.store(true);
  }, "read PYTORCH_NPU_ALLOC_CONF at the next allocation (install() calls it once set up; the card reads it once)");
}
