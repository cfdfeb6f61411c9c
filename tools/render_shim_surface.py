"""Write the CUDA-surface table of docs/shim.md from torchport.shim.surface (run after changing the registry).

    .venv/bin/python tools/render_shim_surface.py          # rewrite the table in docs/shim.md
    .venv/bin/python tools/render_shim_surface.py --check  # exit 1 when the table is stale

The npu column is computed on the emulated npu, so the emulator is installed first.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "shim.md"


def splice(text: str, table: str) -> str:
    """``text`` with the part between the markers replaced by ``table``."""
    from torchport.shim._surface_doc import BEGIN, END

    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n" + table + "\n" + text[end:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 when stale")
    args = parser.parse_args()
    os.environ.setdefault("TORCHPORT_EMULATE", "npu")
    import torch

    import torchport.emulate

    torchport.emulate.install()
    from torchport.shim._surface_doc import render

    text = DOC.read_text(encoding="utf-8")
    new = splice(text, render(torch.npu))
    if args.check:
        if new != text:
            print(f"{DOC} is stale: run tools/render_shim_surface.py", file=sys.stderr)
            return 1
        return 0
    if new != text:
        tmp = DOC.with_suffix(".md.tmp")
        tmp.write_text(new, encoding="utf-8")
        tmp.replace(DOC)
        print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
