"""npu tensors across torch.multiprocessing (Hogwild-style training on a share_memory() model).

A spawned child must receive the parameters on the same emulated device (not as host tensors, which
then fail "npu:0 and cpu" at the first op), and its in-place updates must be seen by the parent.
"""

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import torch, torch.multiprocessing as mp, torch.nn as nn

    def child(model, q):
        p = next(model.parameters())
        x = torch.ones(4, 3, device="npu:0")
        model(x).sum().backward()           # an op mixing the received params with fresh npu data
        q.put((str(p.device), isinstance(p, nn.Parameter), p.grad is not None))
        with torch.no_grad():
            p.add_(1.0)                     # Hogwild: an in-place update of shared memory

    if __name__ == "__main__":
        m = nn.Linear(3, 2).to("npu:0")
        m.share_memory()
        before = next(m.parameters()).detach().cpu().clone()
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        proc = ctx.Process(target=child, args=(m, q))
        proc.start()
        proc.join()
        dev, is_param, has_grad = q.get(timeout=10)   # a crashed child fails fast instead of hanging
        after = next(m.parameters()).detach().cpu()
        print("RESULT", dev, is_param, has_grad, proc.exitcode, bool(torch.equal(after, before + 1)))
''')


def test_shared_npu_model_reaches_a_spawned_child_on_its_device(tmp_path):
    script = tmp_path / "hogwild.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "TORCHPORT_EMULATE": "npu", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    assert line.split()[1:] == ["npu:0", "True", "True", "0", "True"], line
