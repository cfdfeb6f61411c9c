// torchport emulated NPU: the C++ pieces a Python-registered PrivateUse1 backend cannot provide.
//
// * a device guard with real device indices (per-thread current device, like CUDA/torch_npu) and a
//   device count, so C++ (autograd engine queues, DDP reducer, foreach grouping) sees npu:k;
// * device generators: torch.Generator(device="npu:k") and default generators, each delegating to a
//   host (CPU) generator that the Python side uses to draw.
// Streams and events are synchronous no-ops (host memory, synchronous execution).
#include <torch/extension.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/Generator.h>

#include <atomic>
#include <mutex>
#include <vector>

namespace {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;
std::atomic<int> g_capacity{1};
std::atomic<c10::DeviceIndex> g_devices{0};
thread_local c10::DeviceIndex t_current = 0;

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
    if (d.index() >= 0) t_current = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) t_current = d.index();
  }
  c10::Stream getStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream getDefaultStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream getNewStream(c10::Device d, int priority = 0) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const override { return c10::Stream(c10::Stream::DEFAULT, s.device()); }
  c10::DeviceIndex deviceCount() const noexcept override { return static_cast<c10::DeviceIndex>(g_capacity.load()); }
  void record(void** event, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const c10::DeviceIndex) const override {}
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

NpuGuardImpl g_guard;

// A device-typed generator whose state is a host generator's (seeded differently: the device
// stream is not the CPU stream, as on a card).
struct NpuGeneratorImpl : public c10::GeneratorImpl {
  c10::intrusive_ptr<at::CPUGeneratorImpl> inner;
  uint64_t seed_;
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
  void set_offset(uint64_t offset) override { inner->set_offset(offset); }
  uint64_t get_offset() const override { return inner->get_offset(); }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    uint64_t s = c10::detail::getNonDeterministicRandom();
    set_current_seed(s);
    return s;
  }
  void set_state(const c10::TensorImpl& new_state) override { inner->set_state(new_state); }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override { return inner->get_state(); }
  static c10::DeviceType device_type() { return kNpu; }

 private:
  NpuGeneratorImpl* clone_impl() const override {
    auto* g = new NpuGeneratorImpl(device().index(), seed_);
    g->inner = c10::make_intrusive<at::CPUGeneratorImpl>();
    g->inner->set_state(*inner->get_state());
    return g;
  }
};

at::Generator make_generator(c10::DeviceIndex idx) {
  if (idx < 0) idx = t_current;
  return at::make_generator<NpuGeneratorImpl>(idx);
}

std::atomic<bool> g_available{false};
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

// The accelerator hooks (availability, generators, current device) torch asks PrivateUse1 for.
struct NpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return g_available.load(); }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return g_available.load(); }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override { return g_available.load() ? g_devices.load() : 0; }
  void setCurrentDevice(c10::DeviceIndex d) const override { t_current = d; }
  c10::DeviceIndex getCurrentDevice() const override { return t_current; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    auto old = t_current;
    if (d >= 0) t_current = d;
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  bool isPinnedPtr(const void*) const override { return false; }
  c10::Allocator* getPinnedMemoryAllocator() const override { return at::getCPUAllocator(); }
  c10::Device getDeviceFromPtr(void*) const override { return c10::Device(kNpu, t_current); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex idx) const override { return default_generator(idx); }
  at::Generator getNewGenerator(c10::DeviceIndex idx = -1) const override { return make_generator(idx); }
  void resizePrivateUse1Bytes(const c10::Storage&, size_t) const override {
    TORCH_CHECK(false, "resizing npu storage in place is not supported");
  }
};

std::once_flag g_guard_registered;
std::once_flag g_hooks_registered;

void register_guard(int capacity) {
  if (capacity > g_capacity.load()) g_capacity.store(capacity);
  std::call_once(g_guard_registered, [] { static c10::impl::DeviceGuardImplRegistrar reg(kNpu, &g_guard); });
}

void register_hooks() {
  std::call_once(g_hooks_registered, [] { at::RegisterPrivateUse1HooksInterface(new NpuHooks()); });
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("register_guard", &register_guard, "register the npu device guard (sized for `capacity` devices)");
  m.def("register_hooks", &register_hooks, "register the npu accelerator hooks (generators, availability)");
  m.def("set_available", [](bool on, int devices) {
    g_available.store(on);
    g_devices.store(static_cast<c10::DeviceIndex>(on ? devices : 0));
  });
  m.def("default_generator", [](int idx) {
    return py::reinterpret_steal<py::object>(THPGenerator_Wrap(default_generator(static_cast<c10::DeviceIndex>(idx))));
  });
  m.def("capacity", [] { return g_capacity.load(); });
  m.def("current_device", [] { return static_cast<int>(t_current); });
  m.def("set_device", [](int idx) { t_current = static_cast<c10::DeviceIndex>(idx); });
  m.def("host_generator", [](py::object gen) {
    auto g = THPGenerator_Unwrap(gen.ptr());
    auto* impl = dynamic_cast<NpuGeneratorImpl*>(g.unsafeGetGeneratorImpl());
    TORCH_CHECK(impl != nullptr, "not an npu generator");
    return py::reinterpret_steal<py::object>(THPGenerator_Wrap(at::Generator(impl->inner)));
  });
  m.def("new_generator", [](int idx) {
    return py::reinterpret_steal<py::object>(THPGenerator_Wrap(make_generator(static_cast<c10::DeviceIndex>(idx))));
  });
}
