#!/usr/bin/env python3
"""The peer of `make bench BENCH=zero`: PyTorch FSDP2 (`fully_shard`, gloo, CPU) training the GPT of
bench_zero's config on DP ranks, one JSON line from rank 0 like bench_zero's.

A measuring tool, not part of the product: it needs PyTorch (a scratch virtual environment; see
../shared/peers/setup-venv.sh). Run it with torchrun, one thread per rank as bench_zero:
  OMP_NUM_THREADS=1 torchrun --nproc-per-node 4 bench/peers/fsdp2_gpt.py [B|quick] [steps]
Each block and then the root are fully_shard-ed (parameters sharded on dim 0, all-gathered before
forward and again before backward, resharded after; gradients reduce-scattered), AdamW on the
shards. Memory per rank: the sharded parameters, their gradients and AdamW state after the steps
(model_state_bytes_per_rank), and the process's resident memory (rss_bytes)."""
import json, math, os, statistics, sys, time
import torch, torch.nn as nn, torch.nn.functional as F
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

try:
    from torch.distributed.fsdp import fully_shard
except ImportError:  # older PyTorch
    from torch.distributed._composable.fsdp import fully_shard

CONFIGS = {"B": (512, 6, 384, 6, 256), "quick": (256, 2, 64, 2, 64)}  # vocab, layers, width, heads, T; global batch 8


class Block(nn.Module):
    def __init__(s, C, H):
        super().__init__()
        s.ln1, s.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        s.qkv, s.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        s.fc, s.fc2 = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        s.H = H

    def forward(s, x):
        B, T, C = x.shape
        q, k, v = s.qkv(s.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, s.H, C // s.H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + s.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + s.fc2(F.gelu(s.fc(s.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(s, V, L, C, H, T):
        super().__init__()
        s.wte, s.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        s.blocks = nn.ModuleList(Block(C, H) for _ in range(L))
        s.lnf = nn.LayerNorm(C)
        for n, p in s.named_parameters():  # GPT-2 init: N(0, 0.02) weights, zero biases
            if p.dim() > 1:
                nn.init.normal_(p, 0.0, 0.02)
            elif n.endswith("bias"):
                nn.init.zeros_(p)

    def forward(s, idx, tgt):
        x = s.wte(idx) + s.wpe(torch.arange(idx.shape[1]))
        for b in s.blocks:
            x = b(x)
        logits = s.lnf(x) @ s.wte.weight.t()  # tied head
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def local_bytes(ts):
    n = 0
    for t in ts:
        t = t.to_local() if hasattr(t, "to_local") else t
        n += t.numel() * t.element_size()
    return n


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "B"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    V, L, C, H, T = CONFIGS[which]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    torch.manual_seed(0)
    m = GPT(V, L, C, H, T)
    P = sum(p.numel() for p in m.parameters())
    mesh = init_device_mesh("cpu", (world,))
    for b in m.blocks:
        fully_shard(b, mesh=mesh)
    fully_shard(m, mesh=mesh)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.1)
    g = torch.Generator().manual_seed(11)
    data = torch.randint(0, V, (8, T + 1), generator=g)
    rows = 8 // world
    x, y = data[rank * rows:(rank + 1) * rows, :T].contiguous(), data[rank * rows:(rank + 1) * rows, 1:].contiguous()
    times, peak = [], 0
    for i in range(steps + 2):
        t0 = time.perf_counter()
        loss = m(x, y)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
        dt = torch.tensor([time.perf_counter() - t0])
        dist.all_reduce(dt, op=dist.ReduceOp.MAX)
        if i >= 2:
            times.append(dt.item())
        peak = max(peak, rss())
    params = list(m.parameters())
    state = local_bytes(params) + local_bytes(p.grad for p in params if p.grad is not None)
    state += sum(local_bytes(v for v in s.values() if torch.is_tensor(v) and v.dim() > 0) for s in opt.state.values())
    out = torch.tensor([float(state), float(rss()), float(peak)])
    dist.all_reduce(out, op=dist.ReduceOp.MAX)
    med = statistics.median(times)
    if rank == 0:
        print(json.dumps({"bench": "zero", "peer": "pytorch-fsdp2-" + torch.__version__, "config": which, "dp": world, "params": P,
                          "model_state_bytes_per_rank": int(out[0]), "rss_bytes": int(out[1]), "rss_peak_bytes": int(out[2]),
                          "step_s": round(med, 4), "tokens_per_s": round(8 * T / med, 1), "loss": round(loss.item(), 4)}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
