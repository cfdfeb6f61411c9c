"""A tiny character-level GPT trained the way many public LM scripts are written (CUDA-style; ours, for the
hazard report). Typical habits: a causal mask built per step from the sequence length, random sequence lengths,
`loss.item()` every step, int64 token arithmetic, a Python `if` on a tensor for early stopping."""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=8)
args = p.parse_args()
device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
text = ("the quick brown fox jumps over the lazy dog " * 200).encode()
data = torch.tensor(list(text), dtype=torch.long)
V, D, H, L = 256, 64, 4, 2


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D // H)
        mask = torch.tril(torch.ones(T, T, device=x.device))
        att = att.masked_fill(mask == 0, float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, D))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(V, D), nn.Embedding(128, D)
        self.blocks = nn.Sequential(*[Block() for _ in range(L)])
        self.head = nn.Linear(D, V)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.head(self.blocks(self.tok(idx) + self.pos(pos)))


model = GPT().to(device)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
losses = []
for step in range(args.steps):
    T = int(torch.randint(16, 33, (1,)))                 # random context length per step
    ix = torch.randint(len(data) - T - 1, (8,))
    x = torch.stack([data[i:i + T] for i in ix]).to(device)
    y = torch.stack([data[i + 1:i + T + 1] for i in ix]).to(device)
    logits = model(x)
    loss = F.cross_entropy(logits.view(-1, V), y.view(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    losses.append(loss.item())
    tokens_seen = (x != 0).sum() * (step + 1)
    if torch.isnan(loss):
        break
print(f"lm: {len(losses)} steps, last loss {losses[-1]:.3f}")
