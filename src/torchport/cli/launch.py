"""``torchport launch``: run torchrun on this node with the arguments the scheduler's environment implies.

Examples::

    srun --ntasks-per-node 1 torchport launch -- train --data /shared/imagenet --resume auto   # Slurm
    torchport launch --dry-run -- train --epochs 1          # print the torchrun command and where each value came from
    torchport launch --env rank-table --max-restarts 3 -- train --resume auto --run-dir /shared/runs/a
    torchport launch --nnodes 2 --node-rank 1 --master-addr node0 --nproc-per-node 8 -- my_train.py --lr 0.1

Everything after ``--`` is the program every rank runs: a torchport verb (``train ...``), ``-m module ...`` or a
script. Environments read (first match): an HCCL rank table (``RANK_TABLE_FILE``), ModelArts (``MA_*``), Slurm
(``SLURM_*``), Kubeflow PyTorchJob (``PET_*``; per pod ``MASTER_ADDR`` / ``WORLD_SIZE`` / ``RANK``), Volcano
(``VC_*``); none: one standalone node. See docs/cluster.md.

Exit codes: 0 the job succeeded; 2 bad scheduler variables or options (also ``HCCL_IF_IP`` / this node's address
not an address of this node, checked before torchrun starts); 8 the rendezvous failed (nodes missing,
endpoint unreachable) or workers failed; otherwise torchrun's own code.
"""

from __future__ import annotations

import shlex
from typing import List, Optional

import typer

from torchport.cli._common import fail
from torchport.cli._options import device_arg, device_option


def register(app: typer.Typer) -> None:
    """Attach ``launch`` to the torchport app."""
    from torchport.cluster.environments import ENVIRONMENTS

    @app.command("launch", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def launch(
        ctx: typer.Context,
        env_name: str = typer.Option("auto", "--env", metavar="|".join(["auto", *ENVIRONMENTS]),
                                     help="The scheduler environment to read (auto: the first whose variables are set)."),
        nnodes: Optional[int] = typer.Option(None, "--nnodes", min=1, help="Override: nodes in the job."),
        node_rank: Optional[int] = typer.Option(None, "--node-rank", min=0, help="Override: this node's rank."),
        nproc_per_node: Optional[int] = typer.Option(None, "--nproc-per-node", min=1,
                                                     help="Processes on this node (default: the environment's, else "
                                                     "the selected backend's device count, 1 on CPU)."),
        master_addr: Optional[str] = typer.Option(None, "--master-addr", help="Override: node 0's address."),
        master_port: Optional[int] = typer.Option(None, "--master-port", help="Override: the rendezvous port."),
        rdzv_id: Optional[str] = typer.Option(None, "--rdzv-id", help="Override: the job's rendezvous id."),
        local_addr: Optional[str] = typer.Option(None, "--local-addr",
                                                 help="The address this node advertises (torchrun --local-addr)."),
        max_restarts: int = typer.Option(0, "--max-restarts", min=0,
                                         help="torchrun restarts of the whole job after a failure (pair with "
                                         "train --resume auto)."),
        join_timeout: Optional[float] = typer.Option(None, "--join-timeout", min=1.0,
                                                     help="Seconds to wait for every node at the rendezvous "
                                                     "(torchrun's default 600)."),
        connect_timeout: Optional[float] = typer.Option(None, "--connect-timeout", min=1.0,
                                                        help="Seconds to reach the rendezvous endpoint before giving "
                                                        "up (torchrun's read_timeout, default 60)."),
        host_store: Optional[bool] = typer.Option(None, "--host-store/--no-host-store",
                                                  help="Whether this agent hosts the rendezvous store (default: "
                                                  "torchrun decides from its addresses)."),
        device: str = device_option(),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the torchrun command and where each value "
                                     "came from; run nothing."),
    ) -> None:
        """Run torchrun for this node from the scheduler's environment (Slurm, Kubernetes, ModelArts, rank table)."""
        from torchport.cluster.environments import detect, read
        from torchport.cluster.launch import local_address_problem, run_torchrun, torchrun_command, torchrun_env

        program = list(ctx.args)
        plan = detect() if env_name == "auto" else read(env_name)
        overrides = {k: v for k, v in (("nnodes", nnodes), ("node_rank", node_rank), ("master_addr", master_addr),
                                       ("master_port", master_port), ("rdzv_id", rdzv_id), ("local_addr", local_addr))
                     if v is not None}
        if overrides:
            plan = plan.replace(**overrides)
        if overrides.get("nnodes", 1) > 1 and plan.source == "local":
            plan = plan.replace(source="command line")
        nproc = nproc_per_node or plan.nproc_per_node
        nproc_from = "--nproc-per-node" if nproc_per_node else plan.origin.get("nproc_per_node")
        if nproc is None:
            nproc, nproc_from = _device_count(device_arg(device))
        cmd = torchrun_command(plan, program, nproc_per_node=nproc, max_restarts=max_restarts,
                               join_timeout=join_timeout, connect_timeout=connect_timeout, is_host=host_store)
        if dry_run:
            typer.echo(shlex.join(cmd))
            origin = {**plan.origin, "nproc_per_node": nproc_from}
            typer.echo(f"# environment: {plan.source}; " + "; ".join(f"{k} <- {v}" for k, v in origin.items() if v),
                       err=True)
            return
        problem = local_address_problem(plan)
        if problem:
            fail("launch", problem)
        raise typer.Exit(run_torchrun(cmd, plan, join_timeout=join_timeout,
                                      env=torchrun_env(plan, max_restarts=max_restarts)))


def _device_count(device: Optional[str]) -> tuple[int, str]:
    from torchport.runtime.device import select_device

    try:
        target = select_device(device, warn=False)
    except Exception as exc:  # unknown / unavailable backend
        fail("launch", f"--device {device}: {exc}")
    count = max(1, target.backend.device_count()) if target.is_accelerator else 1
    return count, f"{target.backend.name} device count"
