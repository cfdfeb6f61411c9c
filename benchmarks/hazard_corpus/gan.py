"""A tiny DCGAN trained the way the public DCGAN examples are written (CUDA-style; ours, for the hazard report):
two optimizers, label tensors built with torch.full each step, `.item()` logging of D(x) / D(G(z)), noise drawn
in numpy (float64), a Python `if` on a tensor (mode-collapse guard)."""
import argparse

import numpy as np
import torch
import torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=6)
args = p.parse_args()
device = "cuda:0" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
nz = 16
G = nn.Sequential(nn.ConvTranspose2d(nz, 64, 4, 1, 0), nn.BatchNorm2d(64), nn.ReLU(True),
                  nn.ConvTranspose2d(64, 32, 4, 2, 1), nn.BatchNorm2d(32), nn.ReLU(True),
                  nn.ConvTranspose2d(32, 3, 4, 2, 1), nn.Tanh()).to(device)
D = nn.Sequential(nn.Conv2d(3, 32, 4, 2, 1), nn.LeakyReLU(0.2, True),
                  nn.Conv2d(32, 64, 4, 2, 1), nn.BatchNorm2d(64), nn.LeakyReLU(0.2, True),
                  nn.Conv2d(64, 1, 4, 1, 0), nn.Sigmoid()).to(device)
criterion = nn.BCELoss()
optD = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
optG = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
for step in range(args.steps):
    real = torch.randn(16, 3, 16, 16, device=device)
    b = real.size(0)
    label = torch.full((b,), 1.0, dtype=torch.float, device=device)
    D.zero_grad()
    errD_real = criterion(D(real).view(-1), label)
    errD_real.backward()
    D_x = D(real).mean().item()
    noise = torch.from_numpy(np.random.randn(b, nz, 1, 1)).to(device)    # float64 noise
    fake = G(noise.float())
    label.fill_(0.0)
    errD_fake = criterion(D(fake.detach()).view(-1), label)
    errD_fake.backward()
    optD.step()
    G.zero_grad()
    label.fill_(1.0)
    errG = criterion(D(fake).view(-1), label)
    errG.backward()
    optG.step()
    if errG > 10 * (errD_real + errD_fake):                             # collapse guard on tensors
        print("warning: generator far behind")
    noise_energy = (noise ** 2).mean()
print(f"gan: {args.steps} steps, D(x) {D_x:.3f}, errG {errG.item():.3f}")
