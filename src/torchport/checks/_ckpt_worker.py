"""Worker process of the checkpoint-portability check: ``python -m torchport.checks._ckpt_worker JOB OUT``.

``JOB`` is JSON: ``{"mode": "save" | "load", "platform": {...}, "target": "pkg.mod:factory" | null,
"sys_path": [...], ...}``; the result is written to ``OUT`` as JSON.
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    """Run one job file and write its result."""
    job_file, out_file = argv[1], argv[2]
    with open(job_file) as fh:
        job = json.load(fh)
    for p in job.get("sys_path", []):
        if p not in sys.path:
            sys.path.append(p)
    from torchport.checks._ckpt_jobs import Platform, run_load, run_save
    from torchport.checks.target import load_target

    platform = Platform(**job["platform"])
    platform.install()
    target = load_target(job["target"]) if job.get("target") else None
    if job["mode"] == "save":
        result = run_save(target, platform, job["workdir"], steps=job["steps"], resume_steps=job["resume_steps"])
    else:
        result = run_load(target, platform, job["saved"], steps=job["steps"], resume_steps=job["resume_steps"])
    with open(out_file, "w") as fh:
        json.dump(result, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
