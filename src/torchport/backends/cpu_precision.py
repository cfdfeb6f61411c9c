"""The CPU precision policy: low-precision autocast only where this processor runs it natively.

On a CPU, bf16 autocast is a speed-up only where the processor has bf16 arithmetic (x86 AVX512-BF16 or
AMX-BF16, Arm's BF16 extension). Elsewhere every bf16 op converts to fp32 and back, and a ResNet-18 step
measured 10x *slower* than fp32 on an AVX2 machine. So ``precision="auto"`` (``train``'s default, ``Amp``),
the CUDA autocast that ``torchport run`` redirects to the CPU, ``bench`` and ``check`` all ask one function,
:func:`decide`, and get fp32 unless the CPU runs the low precision natively.

How :func:`decide` answers, first rule that applies:

1. ``TORCHPORT_CPU_BF16`` / ``TORCHPORT_CPU_FP16`` = ``native`` | ``none`` | ``probe`` (tests, or a user
   who knows better): the value decides (``probe`` forces the timed probe).
2. What torch will actually execute: ``torch.backends.cpu.get_cpu_capability()`` (ATen's kernels, capped
   by ``ATEN_CPU_CAPABILITY``), ``torch.ops.mkldnn._is_mkldnn_bf16_supported()`` (oneDNN has a bf16 path)
   and ``ONEDNN_MAX_CPU_ISA`` / ``DNNL_MAX_CPU_ISA`` (oneDNN's instruction cap). Any of them below the
   native level is conclusive: not native.
3. The processor's flags (``/proc/cpuinfo``: ``avx512_bf16``, ``amx_bf16``; Arm ``bf16``; for fp16
   ``avx512_fp16``, ``amx_fp16``): flags present -> native; no AVX-512 (x86) or no bf16 feature (Arm)
   -> not native. Both conclusive.
4. Otherwise (AVX-512 without a bf16 flag: oneDNN emulates bf16 with conversions; no readable flags, as on
   macOS or Windows): a short timed probe, fp32 against autocast on a small conv + linear training step,
   cached per machine. Native when the low precision is not slower than fp32.

The same probe gives the *measured cost* that an explicit request (``--precision bf16``, ``Amp("bf16")``,
``torch.autocast("cpu", dtype=torch.bfloat16)`` under ``run``) prints in its one warning line: the request
runs as asked, the user learns what it costs here.

The probe cache is ``$TORCHPORT_CACHE/cpu-precision.json`` (default ``~/.cache/torchport``), one entry per
machine key (CPU model and flags, torch version, the capability caps, thread count), written under a file
lock with an atomic rename; an unwritable cache only costs a re-measurement in the next process.

Example::

    from torchport.backends.cpu_precision import decide
    d = decide("bf16")
    d.native, d.reason        # (False, "AVX2 CPU without AVX512-BF16/AMX (cpuinfo flags)")
    d.cost().ratio            # 10.3 (bf16 step time / fp32 step time, measured once per machine)
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

__all__ = ["Decision", "Cost", "decide", "measure", "cache_path", "ENV", "ISA_ENVS", "reset"]

#: The override variable of each low precision.
ENV = {"bf16": "TORCHPORT_CPU_BF16", "fp16": "TORCHPORT_CPU_FP16"}
#: Environment variables that cap the instructions torch's CPU kernels use (part of the cache key).
ISA_ENVS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")

_SCHEMA = "torchport.cpu-precision/1"
# The cpuinfo flags of native arithmetic, x86 and Arm (Linux spellings).
_X86_FLAGS = {"bf16": ("avx512_bf16", "amx_bf16"), "fp16": ("avx512_fp16", "amx_fp16")}
_ARM_FLAGS = {"bf16": ("bf16",), "fp16": ("asimdhp",)}
_NAMES = {"bf16": "AVX512-BF16/AMX-BF16", "fp16": "AVX512-FP16/AMX-FP16"}
# oneDNN max-ISA values at or above the native level of each precision (oneDNN's cpu_isa names).
_ONEDNN_OK = {
    "bf16": {"AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX10_1_512", "AVX512_CORE_AMX", "AVX10_1_512_AMX",
             "AVX512_CORE_AMX_FP16", "AVX10_1_512_AMX_FP16", "AVX10_2_512", "AVX10_2_512_AMX_2", "ALL", "DEFAULT"},
    "fp16": {"AVX512_CORE_FP16", "AVX10_1_512", "AVX512_CORE_AMX_FP16", "AVX10_1_512_AMX_FP16", "AVX10_2_512",
             "AVX10_2_512_AMX_2", "ALL", "DEFAULT"},
}
_MODES = {"native": "native", "1": "native", "on": "native", "yes": "native", "true": "native",
          "none": "none", "0": "none", "off": "none", "no": "none", "false": "none", "probe": "probe",
          "auto": "auto", "": "auto"}


@dataclasses.dataclass(frozen=True)
class Cost:
    """One timed probe: median step times and their ratio (low precision / fp32; 10.3 = 10.3x slower)."""

    precision: str
    fp32_ms: float
    low_ms: float
    reps: int
    threads: int
    measured: str        # UTC time of the measurement
    cached: bool = False  # read from the per-machine cache, not measured in this process

    @property
    def ratio(self) -> float:
        return self.low_ms / self.fp32_ms if self.fp32_ms > 0 else float("inf")

    def phrase(self) -> str:
        """``"10.3x slower than fp32 (probe: 3.1 vs 32.0 ms per step, 2 threads)"``."""
        r = self.ratio
        how = f"{r:.1f}x slower than" if r >= 1.05 else (f"{1 / r:.2f}x faster than" if r <= 0.95 else "as fast as")
        return (f"{how} fp32 (probe: {self.low_ms:.1f} vs {self.fp32_ms:.1f} ms per small conv+linear training "
                f"step, {self.threads} thread{'s' if self.threads != 1 else ''})")


@dataclasses.dataclass(frozen=True)
class Decision:
    """The policy's answer for one low precision on this CPU.

    Attributes:
        precision: ``"bf16"`` or ``"fp16"``.
        native: True when autocast in ``precision`` runs natively (``auto`` picks it).
        reason: one line saying why (what torch, oneDNN or the flags said, or the probe's figure).
        source: ``"env"``, ``"torch"`` (capability caps), ``"flags"`` or ``"probe"``.
        probe: the probe's :class:`Cost` when the probe decided.
    """

    precision: str
    native: bool
    reason: str
    source: str
    probe: Cost | None = None

    def cost(self) -> Cost:
        """The measured cost of this precision here (the probe, run once per machine and cached)."""
        return self.probe or measure(self.precision)

    def to_dict(self) -> dict[str, Any]:
        return {"precision": self.precision, "native": self.native, "reason": self.reason, "source": self.source,
                "probe_ratio": None if self.probe is None else round(self.probe.ratio, 3)}


# ------------------------------------------------------------------------------------------------ facts
def _cpuinfo() -> tuple[str, frozenset[str]]:
    """(model name, flags) from ``/proc/cpuinfo``; flags empty where it is unreadable (macOS, Windows)."""
    model, flags = "", frozenset()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, val = line.partition(":")
                key = key.strip().lower()
                if key in ("model name", "cpu model", "hardware") and not model:
                    model = val.strip()
                elif key in ("flags", "features") and not flags:
                    flags = frozenset(val.split())
                if model and flags:
                    break
    except OSError:
        pass
    return model or platform.processor() or platform.machine(), flags


def _torch_facts() -> dict[str, Any]:
    import torch

    cap = "DEFAULT"
    with contextlib.suppress(Exception):
        cap = str(torch.backends.cpu.get_cpu_capability())
    ok = {}
    for p, fn in (("bf16", "_is_mkldnn_bf16_supported"), ("fp16", "_is_mkldnn_fp16_supported")):
        ok[p] = False
        with contextlib.suppress(Exception):
            ok[p] = bool(torch.backends.mkldnn.is_available() and getattr(torch.ops.mkldnn, fn)())
    return {"capability": cap, "mkldnn": ok, "torch": torch.__version__, "threads": torch.get_num_threads()}


def _arch() -> str:
    m = platform.machine().lower()
    return "arm" if m in ("arm64", "aarch64") or m.startswith("armv") else ("x86" if m in ("x86_64", "amd64", "i686", "i386") else m)


def _mode(precision: str) -> str:
    name = ENV[precision]
    raw = os.environ.get(name, "")
    mode = _MODES.get(raw.strip().lower())
    if mode is None:
        from torchport.errors import ConfigError

        raise ConfigError(f"environment variable {name}={raw!r} is not one of native, none, probe, auto")
    return mode


def _onednn_cap() -> tuple[str, str] | None:
    for name in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        val = os.environ.get(name, "").strip()
        if val:
            return name, val.upper()
    return None


# ------------------------------------------------------------------------------------------------ decide
def decide(precision: str = "bf16") -> Decision:
    """Whether this CPU runs ``precision`` (``"bf16"`` | ``"fp16"``) autocast natively, and why.

    Cached per process and per value of the variables it reads (``TORCHPORT_CPU_*``, the ISA caps), so a
    test or a user changing them gets a fresh answer. The timed probe runs only when the facts are not
    conclusive, and then once per machine (its result is cached on disk).

    Raises:
        ConfigError: ``TORCHPORT_CPU_BF16`` / ``TORCHPORT_CPU_FP16`` has a value that is not a mode.
    """
    if precision not in ENV:
        raise ValueError(f"precision {precision!r} is not one of {', '.join(ENV)}")
    return _decide(precision, _mode(precision), tuple(os.environ.get(v, "") for v in ISA_ENVS))


@functools.lru_cache(maxsize=None)
def _decide(precision: str, mode: str, _isa_env: tuple[str, ...]) -> Decision:
    env = ENV[precision]
    if mode == "native":
        return Decision(precision, True, f"{env}=native", "env")
    if mode == "none":
        return Decision(precision, False, f"{env}=none", "env")
    if mode == "probe":
        return _probed(precision, f"{env}=probe")
    facts = _torch_facts()
    _model, flags = _cpuinfo()
    arch, cap = _arch(), facts["capability"]
    table = _X86_FLAGS if arch == "x86" else _ARM_FLAGS if arch == "arm" else {}
    have = [f for f in table.get(precision, ()) if f in flags]
    if flags and table and not have and (arch == "arm" or "avx512f" not in flags):
        what = _NAMES[precision] if arch == "x86" else f"the {precision} extension"
        return Decision(precision, False, f"{cap} CPU without {what} (cpuinfo flags)", "flags")
    onednn = _onednn_cap()
    if onednn is not None and onednn[1] not in _ONEDNN_OK[precision]:
        return Decision(precision, False, f"{onednn[0]}={onednn[1]} caps oneDNN below native {precision}", "torch")
    if arch == "x86" and not cap.startswith("AVX512"):
        why = f"ATen runs {cap} kernels" + (f" (ATEN_CPU_CAPABILITY? the CPU has {', '.join(have)})" if have else "")
        return Decision(precision, False, f"{why}: no native {precision}", "torch")
    if not facts["mkldnn"][precision]:
        return Decision(precision, False, f"{cap} CPU: oneDNN has no {precision} path "
                        f"(torch.ops.mkldnn._is_mkldnn_{precision}_supported() is False)", "torch")
    if have:
        return Decision(precision, True, f"{cap} CPU with {', '.join(have)} (cpuinfo flags)", "flags")
    if flags and table:
        return _probed(precision, f"{cap} CPU without {_NAMES.get(precision)} flags (oneDNN emulates {precision})")
    return _probed(precision, f"{cap} CPU, no readable cpuinfo flags")


def _probed(precision: str, why: str) -> Decision:
    cost = measure(precision)
    native = cost.ratio <= 1.0
    return Decision(precision, native, f"{why}; timed probe: {precision} {cost.phrase()}", "probe", cost)


# ------------------------------------------------------------------------------------------------ probe
def cache_path() -> Path:
    """``$TORCHPORT_CACHE/cpu-precision.json`` (default ``~/.cache/torchport``)."""
    root = os.environ.get("TORCHPORT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "torchport")
    return Path(root) / "cpu-precision.json"


def _key(precision: str) -> str:
    facts = _torch_facts()
    model, flags = _cpuinfo()
    parts = [precision, model, " ".join(sorted(flags)), platform.machine(), facts["torch"], facts["capability"],
             str(facts["threads"]), *(f"{v}={os.environ.get(v, '')}" for v in ISA_ENVS)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


@functools.lru_cache(maxsize=None)
def _measured(precision: str, key: str) -> Cost:
    path = cache_path()
    cached = _read(path).get(key)
    if cached:
        with contextlib.suppress(Exception):
            return Cost(**{**cached, "cached": True})
    cost = _time_probe(precision)
    _store(path, key, cost)
    return cost


def measure(precision: str = "bf16") -> Cost:
    """The timed probe for ``precision`` on this machine: from the cache, else measured (~0.5 s) and cached."""
    if precision not in ENV:
        raise ValueError(f"precision {precision!r} is not one of {', '.join(ENV)}")
    return _measured(precision, _key(precision))


def reset() -> None:
    """Forget this process's decisions and probe results (tests; the disk cache stays)."""
    _decide.cache_clear()
    _measured.cache_clear()


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("schema") != _SCHEMA or not isinstance(data.get("entries"), dict):
        return {}
    return data["entries"]


def _store(path: Path, key: str, cost: Cost) -> None:
    """Add ``cost`` under ``key``: file lock, read-modify-write, atomic rename. Failures are harmless."""
    try:
        from filelock import FileLock

        from torchport._json import write_json

        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock", timeout=30):
            entries = _read(path)
            entries[key] = {k: v for k, v in dataclasses.asdict(cost).items() if k != "cached"}
            write_json(path, {"schema": _SCHEMA, "entries": entries})
    except Exception:  # noqa: BLE001 - a read-only or full cache costs a re-measurement, never the run
        pass


def _time_probe(precision: str, reps: int = 5) -> Cost:
    """Median step time of fp32 and of ``precision`` autocast on a small conv + linear model, alternated.

    The model is plain tensors and functional ops, its backward ``torch.autograd.grad``: the probe runs inside the
    user's process (the first explicit request, mid-script), so no ``nn.Module`` is built or called and
    ``Tensor.backward`` is not used -- a global module hook or a patched ``backward`` (a profiler, a logger, a test
    harness) sees nothing of it; the random streams are forked."""
    import datetime

    import torch

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    F = torch.nn.functional
    with torch.random.fork_rng(devices=[]):   # the probe must not move the user's random streams
        torch.manual_seed(0)
        shapes = [(16, 3, 3, 3), (16,), (16, 16, 3, 3), (16,), (256, 256), (256,), (10, 256), (10,)]
        params = [(torch.randn(*s) * 0.1).requires_grad_() for s in shapes]
        x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))

    def step(low: bool) -> float:
        w1, b1, w2, b2, w3, b3, w4, b4 = params
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=dtype, enabled=low):
            h = F.relu(F.conv2d(x, w1, b1, padding=1))
            h = F.relu(F.conv2d(h, w2, b2, padding=1))
            h = F.adaptive_avg_pool2d(h, 4).flatten(1)
            loss = F.cross_entropy(F.linear(F.relu(F.linear(h, w3, b3)), w4, b4), y)
        torch.autograd.grad(loss, params)
        return (time.perf_counter() - t0) * 1000.0

    times: dict[bool, list[float]] = {False: [], True: []}
    with torch.autocast("cpu", enabled=False):   # whatever the caller has open, the probe decides its own
        step(False), step(True)                   # warm-up: oneDNN primitive creation
        for _ in range(reps):
            for low in (False, True):
                times[low].append(step(low))
    return Cost(precision=precision, fp32_ms=statistics.median(times[False]), low_ms=statistics.median(times[True]),
                reps=reps, threads=torch.get_num_threads(),
                measured=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
