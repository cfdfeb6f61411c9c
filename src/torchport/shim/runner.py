"""Run a script or module under the shim, then emit the redirect report: what ``torchport run`` does.

Kept apart from the CLI so it can be called (and tested) in-process::

    from torchport.shim.runner import RunConfig, run
    code = run(RunConfig(target="train.py", args=["--steps", "2"], report="none", report_file="r.json"))
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import os
import runpy
import sys
import traceback
import warnings
from typing import Any, Sequence

from torchport.errors import ExitCode, exit_code_for

__all__ = ["RunConfig", "run", "report_path_for_rank", "EXIT_USAGE", "EXIT_NO_ACCELERATOR"]

#: Bad arguments: script or module not found, unknown or unavailable device, malformed setting, a foreign
#: shim is active (:attr:`torchport.errors.ExitCode.USAGE`).
EXIT_USAGE = int(ExitCode.USAGE)
#: Require-accelerator mode and no accelerator (:attr:`torchport.errors.ExitCode.NO_ACCELERATOR`, the
#: same code every verb uses).
EXIT_NO_ACCELERATOR = int(ExitCode.NO_ACCELERATOR)

REPORT_FORMATS = ("text", "json", "none")


@dataclasses.dataclass(kw_only=True)
class RunConfig:
    """What to run and how to report it.

    Args:
        target: script path, or module name when ``module`` is True.
        args: arguments passed to the script (``sys.argv[1:]``).
        module: run ``target`` like ``python -m target``.
        device: ``"auto"``/None, a backend name or ``"npu:1"``.
        require_accelerator: fail (exit 3) instead of running on CPU; None = env default.
        report: what rank 0 prints on stderr at exit: ``"text"``, ``"json"`` or ``"none"``.
        report_file: where the JSON report goes (ranks > 0 add ``.rank<N>`` before the suffix);
            ``"-"`` = stdout after the script's output (rank 0; then nothing is printed on stderr).
        outputs: more report files, each with a ``fmt`` (``text`` or ``json``) and a ``path`` (``-`` =
            stdout, rank 0): :class:`torchport.cli._options.ReportFile` values (``torchport run -o``; written by
            :func:`torchport._json.write_reports`).
        user_paths: extra files/directories counted as user code.
        numerics: ``"exact"`` (default), ``"npu"`` or ``"cuda"``: float32 conv/matmul computed in that
            card's default numerics (HF32 / TF32 operand rounding, :mod:`torchport.emulate._numerics`);
            this process only, not in interpreters the script starts.
        hazards: write the performance-hazard report here (:mod:`torchport.profile.hazards`; ``.json``,
            ``.html`` or text by suffix, ``-`` = text on stderr) when the script ends.
    """

    target: str
    args: Sequence[str] = ()
    module: bool = False
    device: str | None = None
    require_accelerator: bool | None = None
    report: str = "text"
    report_file: str | None = None
    outputs: Sequence[Any] = ()
    user_paths: Sequence[str] = ()
    numerics: str = "exact"
    hazards: str | None = None


def report_path_for_rank(path: str, rank: int) -> str:
    """``report.json`` for rank 0, ``report.rank1.json`` for rank 1 (so ranks never overwrite each other)."""
    if rank == 0:
        return path
    root, ext = os.path.splitext(path)
    return f"{root}.rank{rank}{ext}"


def _err(msg: str) -> None:
    print(f"torchport run: error: {msg}", file=sys.stderr)


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message") prints the message and exits 1
    return 1


def _module_user_path(name: str) -> str | None:
    """The directory (package) or file (module) of what ``-m name`` runs, for caller classification."""
    try:
        spec = importlib.util.find_spec(name.split(".")[0])
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return list(spec.submodule_search_locations)[0]
    return spec.origin


_previous = None  # the shim the last run() installed; left in place for the script's atexit handlers


def run(config: RunConfig) -> int:
    """Install the shim, run the target as ``__main__``, emit the report; return the exit code.

    The shim stays installed afterwards, so the script's ``atexit`` handlers still see it;
    the next :func:`run` in the same process replaces it.

    The script's own exit code is returned (``sys.exit(n)`` -> n, an uncaught exception -> 1,
    with its traceback printed). Setup failures return :data:`EXIT_USAGE` or
    :data:`EXIT_NO_ACCELERATOR` with a message saying what to change.
    """
    if config.report not in REPORT_FORMATS:
        _err(f"--report {config.report!r} is not one of {', '.join(REPORT_FORMATS)}")
        return EXIT_USAGE
    from torchport.emulate._numerics import CARDS

    if config.numerics not in CARDS:
        _err(f"--numerics {config.numerics!r} is not one of {', '.join(CARDS)}")
        return EXIT_USAGE
    if config.hazards is not None:
        from torchport._json import check_writable
        from torchport.errors import WriteError

        try:
            check_writable(config.hazards, what="--hazards report")
        except WriteError as exc:
            _err(str(exc))
            return int(ExitCode.IO)
    user_paths = list(config.user_paths)
    saved_argv, saved_path = sys.argv, list(sys.path)
    # Like `python -m` / `python script.py`: the working directory / the script's directory comes first.
    sys.path.insert(0, os.getcwd() if config.module else os.path.dirname(os.path.abspath(config.target)))
    try:
        return _run(config, user_paths)
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path


def _run(config: RunConfig, user_paths: list) -> int:
    from torchport.backends.registry import UnknownBackendError
    from torchport.backends.spec import BackendUnavailable
    from torchport.runtime.device import ConfigError, NoAcceleratorError
    from torchport.runtime.device import CPUFallbackWarning
    from torchport.shim.core import CPU_FALLBACK_MESSAGE, ShimError, active, install, uninstall
    from torchport.shim.surface import RefusedCall

    global _previous
    if config.module:
        where = _module_user_path(config.target)
        if where is None:
            _err(f"no module named {config.target!r} (is it installed, or is the current directory its parent?)")
            return EXIT_USAGE
        user_paths.append(where)
        argv0 = config.target  # runpy replaces it with the module's file, as `python -m` does
    else:
        script = os.path.abspath(config.target)
        if not os.path.isfile(script):
            _err(f"script not found: {config.target!r}")
            return EXIT_USAGE
        user_paths.append(script)
        argv0 = config.target

    if _previous is not None and active() is _previous:
        uninstall()  # a previous in-process run (tests, notebooks) left its shim for its atexit handlers
    try:
        shim = install(config.device, require_accelerator=config.require_accelerator, user_paths=user_paths,
                       warn=False)
    except (NoAcceleratorError, BackendUnavailable, ShimError, UnknownBackendError, ConfigError) as exc:
        _err(str(exc))
        return int(exit_code_for(exc) or ExitCode.USAGE)
    _previous = shim
    if shim.cpu_fallback:  # the one loud warning, attributed to the command rather than to this file
        warnings.warn_explicit(CPU_FALLBACK_MESSAGE, CPUFallbackWarning, "torchport run", 0)

    sys.argv = [argv0, *config.args]
    code = 0
    import shutil

    from torchport.shim import child

    # interpreters the script starts (mp.spawn ...) install the same shim at start-up and leave their reports here
    from torchport._tmpfiles import mkdtemp_owned

    children = mkdtemp_owned("torchport-run-")   # a run killed outright leaves it; the next run removes it
    saved_env = os.environ.get(child.ENV)
    os.environ[child.ENV] = child.settings(device=config.device, require_accelerator=config.require_accelerator,
                                           user_paths=user_paths, report_dir=children)
    finished = []

    def finish() -> None:
        """Restore the environment, gather the children's reports, remove the temp dir, emit -- once."""
        if finished:
            return
        finished.append(True)
        if saved_env is None:
            os.environ.pop(child.ENV, None)
        else:
            os.environ[child.ENV] = saved_env
        child.collect(shim.report, children)
        shutil.rmtree(children, ignore_errors=True)
        _emit(shim.report, config)

    # A script may leave through os._exit(N), which skips every `finally` and atexit handler: the report
    # would silently be missing and the temp dir left behind. Finish first -- in this process only, never
    # in a forked child (a DataLoader worker, an mp.Process) that inherits the wrapper.
    real_exit, parent = os._exit, os.getpid()

    def _exit(status: int) -> None:
        if os.getpid() == parent:
            try:
                finish()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
        real_exit(status)

    os._exit = _exit
    from torchport.emulate._numerics import card_numerics

    watch = contextlib.nullcontext(None)
    if config.hazards is not None:
        from torchport.profile.hazards import record_hazards

        watch = record_hazards(user_paths, device=str(shim.target))
    try:
        with watch as recorder, card_numerics(config.numerics):
            try:
                if config.module:
                    runpy.run_module(config.target, run_name="__main__", alter_sys=True)
                else:
                    runpy.run_path(config.target, run_name="__main__")
            finally:
                if recorder is not None:
                    from torchport.profile.hazards import write_hazards

                    write_hazards(recorder.report(), config.hazards,
                                  announce=lambda line: print(f"torchport run: {line}", file=sys.stderr))
    except SystemExit as exc:
        code = _exit_code(exc)
    except KeyboardInterrupt:
        code = 130
    except RefusedCall as exc:  # a CUDA call with no counterpart on the target: one line, where it was made
        _err(f"{exc} ({_user_site(shim, exc.__traceback__)})")
        code = 1
    except BaseException:  # the script's own error: show it like python would
        traceback.print_exc()
        code = 1
    finally:
        if os._exit is _exit:
            os._exit = real_exit
        finish()
    return code


def _user_site(shim: Any, tb: Any) -> str:
    """``file:line`` of the innermost user-code frame of a traceback (where the refused call was made)."""
    site = "?"
    while tb is not None:
        if shim.classifier.is_user_file(tb.tb_frame.f_code.co_filename):
            site = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return site


def _emit(report, config: RunConfig) -> None:
    from torchport.runtime.device import env_int

    rank = env_int("RANK", 0) or 0
    try:
        if config.report_file == "-":   # --json -: JSON on stdout after the script's own output (rank 0)
            if rank == 0:
                print(report.to_json(), flush=True)
        elif config.report_file:
            report.write_json(report_path_for_rank(config.report_file, rank))
        if config.outputs:
            from torchport._json import write_reports

            texts = {"text": report.to_text, "json": report.to_json}
            write_reports("run", [o for o in config.outputs if rank == 0 or o.path != "-"],
                          lambda fmt: texts[fmt]() + "\n", path_for=lambda p: report_path_for_rank(p, rank),
                          announce=None if rank == 0 else (lambda line: None))
        if rank != 0 or config.report_file == "-":
            return
        if config.report == "text":
            report.print(sys.stderr)
        elif config.report == "json":
            print(report.to_json(), file=sys.stderr)
    except Exception as exc:  # never hide the script's result behind a reporting failure
        _err(f"could not write the redirect report: {exc}")
