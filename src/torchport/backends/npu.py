"""Huawei Ascend NPUs (torch_npu: device type ``npu``, collectives over HCCL).

torch_npu is imported only when the probe runs (never at torchport import), and
only if it is installed; an import failure (typically CANN not sourced) is kept
and shown by ``torchport doctor`` together with :func:`diagnose_ascend`.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType
from typing import Any, Callable, Mapping, Sequence

from torchport.backends._util import torch_module
from torchport.backends.spec import AmpPolicy, BackendSpec

#: Python packages CANN's TBE operator compiler imports at first kernel build.
TBE_PYTHON_DEPS = ("attrs", "cloudpickle", "decorator", "ml_dtypes", "psutil", "scipy", "tornado")
#: pip names for :data:`TBE_PYTHON_DEPS` (import name -> distribution name).
TBE_PIP_NAMES = {"ml_dtypes": "ml-dtypes"}

_import_error: str | None = None


def import_error() -> str | None:
    """Why ``import torch_npu`` failed in this process (None if it did not fail)."""
    return _import_error


def _torch_npu() -> ModuleType | None:
    """Import torch_npu once, guarded: None when absent or broken (error kept for doctor)."""
    global _import_error
    mod = sys.modules.get("torch_npu")
    if mod is not None:
        return mod
    if _import_error is not None or importlib.util.find_spec("torch_npu") is None:
        return None
    try:
        import torch_npu  # noqa: F401  (registers torch.npu)

        return sys.modules["torch_npu"]
    except Exception as exc:  # CANN missing, version mismatch, missing TBE deps
        _import_error = f"{type(exc).__name__}: {exc}"
        return None


def _module() -> ModuleType | None:
    mod = torch_module("npu")
    if mod is None and _torch_npu() is not None:
        mod = torch_module("npu")
    return mod


def _available() -> bool:
    mod = _module()
    try:
        return bool(mod is not None and mod.is_available())
    except Exception:
        return False


def _count() -> int:
    return int(_module().device_count()) if _available() else 0


def _bf16() -> bool:
    mod = _module()
    try:
        return bool(mod is not None and mod.is_bf16_supported())
    except Exception:
        return False


def diagnose_ascend(
    environ: Mapping[str, str] | None = None,
    sys_path: Sequence[str] | None = None,
    has_module: Callable[[str], bool] | None = None,
    torch_npu_installed: bool | None = None,
) -> list[dict[str, str]]:
    """Find the classic Ascend environment mistakes; each problem comes with its fix.

    Pure function of its inputs so it can be tested on constructed environments.

    Args:
        environ: environment variables (default ``os.environ``).
        sys_path: the interpreter's import path (default ``sys.path``).
        has_module: ``name -> bool`` import check (default: importlib find_spec).
        torch_npu_installed: override the torch_npu presence check.

    Returns:
        A list of ``{"id", "problem", "fix"}`` dicts; empty when nothing is wrong
        (or when this is not an Ascend host at all).
    """
    env = os.environ if environ is None else environ
    path = list(sys.path if sys_path is None else sys_path)
    if has_module is None:
        def has_module(name: str) -> bool:
            return name in sys.modules or importlib.util.find_spec(name) is not None
    if torch_npu_installed is None:
        torch_npu_installed = has_module("torch_npu")
    problems: list[dict[str, str]] = []
    toolkit = env.get("ASCEND_TOOLKIT_HOME") or env.get("ASCEND_HOME_PATH")
    ascend_host = torch_npu_installed or toolkit or any(k.startswith("ASCEND_") for k in env)
    if not ascend_host:
        return problems
    if not toolkit:
        problems.append({
            "id": "cann-not-sourced",
            "problem": "CANN environment is not set (ASCEND_TOOLKIT_HOME / ASCEND_HOME_PATH unset).",
            "fix": "source /usr/local/Ascend/ascend-toolkit/set_env.sh (adjust to your CANN install) "
                   "before starting Python, e.g. in ~/.bashrc or the job script.",
        })
    else:
        ld = env.get("LD_LIBRARY_PATH", "")
        if toolkit not in ld and "Ascend" not in ld:
            problems.append({
                "id": "cann-libs-missing",
                "problem": f"LD_LIBRARY_PATH does not contain the CANN libraries under {toolkit}.",
                "fix": f"source {toolkit}/set_env.sh (it sets LD_LIBRARY_PATH, PYTHONPATH and ASCEND_OPP_PATH).",
            })
        if not env.get("ASCEND_OPP_PATH"):
            problems.append({
                "id": "opp-path-missing",
                "problem": "ASCEND_OPP_PATH is unset: operator packages cannot be found.",
                "fix": f"source {toolkit}/set_env.sh",
            })
        # set_env.sh prepends CANN's python dirs to PYTHONPATH; when it is sourced AFTER a venv
        # was activated, CANN's site-packages shadow the venv's, or the venv's are missing.
        venv = env.get("VIRTUAL_ENV")
        pp = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        cann_pp = [i for i, p in enumerate(path) if toolkit in p or "/Ascend/" in p]
        venv_pp = [i for i, p in enumerate(path) if venv and p.startswith(venv)]
        if not any(toolkit in p or "/Ascend/" in p for p in pp):
            problems.append({
                "id": "cann-pythonpath-missing",
                "problem": "PYTHONPATH lacks CANN's Python packages (te, tbe, op_compile_tool).",
                "fix": f"source {toolkit}/set_env.sh in this shell.",
            })
        elif venv and cann_pp and venv_pp and min(cann_pp) < min(venv_pp):
            problems.append({
                "id": "cann-sourced-after-venv",
                "problem": "CANN's set_env.sh was sourced after the virtualenv was activated: CANN's "
                           "Python paths come before the venv's site-packages and shadow its packages.",
                "fix": "deactivate; source set_env.sh first, then activate the venv "
                       f"(source {toolkit}/set_env.sh && source {venv}/bin/activate).",
            })
    missing = [m for m in TBE_PYTHON_DEPS if not has_module(m)]
    if missing:
        pip_names = " ".join(TBE_PIP_NAMES.get(m, m) for m in missing)
        problems.append({
            "id": "tbe-deps-missing",
            "problem": f"Python packages CANN's TBE compiler needs are missing: {', '.join(missing)}.",
            "fix": f"pip install {pip_names}",
        })
    if torch_npu_installed and env.get("HCCL_CONNECT_TIMEOUT") is None and int(env.get("WORLD_SIZE", "1") or 1) > 1:
        problems.append({
            "id": "hccl-timeout-default",
            "problem": "Multi-process run with HCCL_CONNECT_TIMEOUT unset (default 120 s) may time out on large clusters.",
            "fix": "export HCCL_CONNECT_TIMEOUT=1200 (and HCCL_EXEC_TIMEOUT) for multi-node jobs; check HCCL_IF_IP.",
        })
    if not torch_npu_installed:
        problems.append({
            "id": "torch-npu-missing",
            "problem": "CANN is present but torch_npu is not installed in this Python.",
            "fix": "pip install torch-npu==<the release paired with your torch version> (see Ascend/pytorch README).",
        })
    return problems


def cann_version(env: Mapping[str, str] | None = None) -> str | None:
    """The CANN toolkit version from ``ASCEND_TOOLKIT_HOME`` / ``ASCEND_HOME_PATH`` (None when neither is set)."""
    env = os.environ if env is None else env
    home = env.get("ASCEND_TOOLKIT_HOME") or env.get("ASCEND_HOME_PATH")
    if not home:
        return None
    for rel in ("version.cfg", "compiler/version.info", "runtime/version.info"):
        path = os.path.join(home, rel)
        try:
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    if "version" in line.lower() and "=" in line:
                        return line.split("=", 1)[1].strip()
        except OSError:
            continue
    return f"unknown (at {home})"


def _facts() -> dict[str, Any]:
    facts: dict[str, Any] = {"versions": {"cann": cann_version()}}
    mod = sys.modules.get("torch_npu")
    if mod is not None:
        facts["torch_npu"] = getattr(mod, "__version__", "?")
    if _import_error:
        facts["import_error"] = _import_error
    facts["cann"] = os.environ.get("ASCEND_TOOLKIT_HOME") or os.environ.get("ASCEND_HOME_PATH")
    if _available():
        m = _module()
        facts["devices"] = m.device_count()
        try:
            facts["names"] = [m.get_device_name(i) for i in range(m.device_count())]
        except Exception:
            pass
    facts["problems"] = diagnose_ascend()
    return facts


def _compile_mode(value: Any) -> bool:
    """``torch.npu.set_compile_mode(jit_compile=value)`` (online operator compilation on or off)."""
    fn = getattr(_module(), "set_compile_mode", None)
    if fn is None:
        return False
    fn(jit_compile=bool(value))
    return True


def _npu_attr(owner: str, attr: str) -> Callable[[Any], bool]:
    """A knob setter for ``torch.npu.<owner>.<attr> = value``."""
    def setter(value: Any) -> bool:
        target = getattr(_module(), owner, None)
        if target is None or not hasattr(target, attr):
            return False
        setattr(target, attr, value)
        return True

    return setter


#: torchport.tune() knobs: CANN online compilation, private (5HD/NZ) formats, HF32.
KNOBS = {
    "jit_compile": _compile_mode,
    "allow_internal_format": _npu_attr("config", "allow_internal_format"),
    "matmul_allow_hf32": _npu_attr("matmul", "allow_hf32"),
    "conv_allow_hf32": _npu_attr("conv", "allow_hf32"),
}

SPEC = BackendSpec(
    name="npu",
    priority=100,
    probe=_available,
    module=_module,
    device_count=_count,
    dist_backend="hccl",
    visible_devices_env="ASCEND_RT_VISIBLE_DEVICES",
    # Ascend: fp16 is the native fast path and needs dynamic loss scaling; 910B runs bf16 too.
    amp=AmpPolicy(low_precision=("fp16", "bf16"), fp16_needs_scaler=True, auto_order=("bf16", "fp16"), bf16_probe=_bf16),
    pin_memory=True,
    data_parallel=False,
    install_hint="Install torch_npu matching your torch version (pip install torch-npu) and source CANN's "
                 "set_env.sh; `torchport doctor` diagnoses the environment. To try the NPU path without "
                 "hardware, set TORCHPORT_EMULATE=npu.",
    compile_backend=None,  # torch.compile on Ascend needs torchair; not assumed
    graph_api="NPUGraph",  # torch_npu's aclgraph capture (torch_npu/npu/graphs.py)
    doctor_facts=_facts,
    plugin="torch_npu",
    knobs=KNOBS,
)
