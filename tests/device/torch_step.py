"""A small training run with torch.distributed (gloo, CPU), for tests/device/test_torch_gloo.py.

    python3 torch_step.py RANK WORLD MASTER_ADDR PORT   one of WORLD processes, DDP over gloo

Same model, data and seed everywhere: a two-layer MLP, a regression batch of 16 samples, SGD,
STEPS steps. Rank r trains on its 16/WORLD samples and DistributedDataParallel averages the
gradients over gloo, which with a mean loss and equal shares is the whole batch's gradient:
the losses (averaged over the ranks) and the final weights must match a run on the whole batch
in one process, which rank 0 also does, without torch.distributed (one process: importing
torch takes minutes under TCG). Gloo picks its interface from GLOO_SOCKET_IFNAME. Rank 0
prints one JSON line: {"single": RUN, "distributed": RUN}, RUN = {"losses": [...],
"weights": [...]}.
"""

from __future__ import annotations

import json
import sys

import torch
import torch.distributed as dist
from torch import nn

STEPS = 3
BATCH = 16


def model_and_data() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(26)
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1)).double()
    x = torch.randn(BATCH, 8, dtype=torch.float64)
    y = x.sum(dim=1, keepdim=True).sin()
    return model, x, y


def train(model: nn.Module, x: torch.Tensor, y: torch.Tensor, world: int) -> list[float]:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()  # DDP: gradients all-reduced (averaged) over gloo here
        opt.step()
        total = loss.detach().clone()
        if world > 1:
            dist.all_reduce(total)  # the batch's loss: the mean of the ranks' equal shares
        losses.append(total.item() / world)
    return losses


def weights(model: nn.Module) -> list[float]:
    return torch.cat([p.detach().flatten() for p in model.parameters()]).tolist()


def main(argv: list[str]) -> None:
    torch.set_num_threads(1)
    assert dist.is_available() and dist.is_gloo_available(), "torch.distributed without gloo"
    rank, world, addr, port = int(argv[1]), int(argv[2]), argv[3], argv[4]
    if rank == 0:
        model, x, y = model_and_data()
        single = {"losses": train(model, x, y, 1), "weights": weights(model)}
    model, x, y = model_and_data()
    dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=rank,
                            world_size=world)
    share = BATCH // world
    ddp = nn.parallel.DistributedDataParallel(model)
    losses = train(ddp, x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share],
                   world)
    if rank == 0:
        print(json.dumps({"single": single,
                          "distributed": {"losses": losses, "weights": weights(model)}}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv)
