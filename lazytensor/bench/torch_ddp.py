"""PyTorch DistributedDataParallel, the peer of `bench --suite train --nproc N`; run by torchrun:

    python -m torch.distributed.run --standalone --nproc_per_node=N -m lazytensor.bench.torch_ddp \\
        --model vgg16bn --px 224 --batch 64 --device cuda --mode eager

One process per GPU (NCCL; gloo on the CPU), channels_last, float16 autocast with GradScaler on CUDA
(the CUDA graph mode: autocast without it, as the one-GPU suite), SGD as the train suite. Rank 0
prints the global img/s over the timed steps, after a warm-up.
"""
from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    import torch
    import torch.distributed as dist
    from lazytensor.bench.torch_models import build
    from lazytensor.bench.train import LR, MOMENTUM, WEIGHT_DECAY, _captured_step, _num_classes
    p = argparse.ArgumentParser()
    for name, kind in (("--model", str), ("--px", int), ("--batch", int), ("--steps", int), ("--device", str),
                       ("--mode", str)):
        p.add_argument(name, type=kind, required=True)
    args = p.parse_args()
    cuda = args.device == "cuda"
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local)
        torch.backends.cudnn.benchmark = True
    dist.init_process_group("nccl" if cuda else "gloo")
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    torch.manual_seed(0)
    model = build(torch, args.model, args.px, _num_classes(args.px)).to(device).to(memory_format=torch.channels_last)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local] if cuda else None,
                                                    static_graph=args.mode == "CUDA graph")
    opt = torch.optim.SGD(ddp.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    x = torch.randn(args.batch, 3, args.px, args.px, device=device).contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, _num_classes(args.px), (args.batch,), device=device)
    F = torch.nn.functional
    if args.mode == "CUDA graph":
        step = _captured_step(torch, ddp, opt, x, labels, torch.float16, warmup=11)
    else:
        scaler = torch.amp.GradScaler("cuda", enabled=cuda)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast(args.device, dtype=torch.float16, enabled=cuda):
                loss = F.cross_entropy(ddp(x), labels)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    for _ in range(3):
        step()
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    sync()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    sync()
    dist.barrier()
    seconds = time.perf_counter() - start
    if dist.get_rank() == 0:
        print(f"img/s: {args.batch * dist.get_world_size() * args.steps / seconds:.1f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
