"""Re-creates the PyTorch-GAN pattern (eriklindernoren/PyTorch-GAN implementations/*/*.py): a `cuda` flag,
the legacy `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor` alias, Variable, `.type(Tensor)`."""
# corpus-args: --n_epochs 1 --batch_size 8
import argparse

import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable

parser = argparse.ArgumentParser()
parser.add_argument("--n_epochs", type=int, default=200)
parser.add_argument("--batch_size", type=int, default=64)
parser.add_argument("--latent_dim", type=int, default=16)
opt = parser.parse_args()

cuda = True if torch.cuda.is_available() else False


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(opt.latent_dim, 32), nn.LeakyReLU(0.2, inplace=True), nn.Linear(32, 64),
                                   nn.Tanh())

    def forward(self, z):
        return self.model(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(64, 32), nn.LeakyReLU(0.2, inplace=True), nn.Linear(32, 1), nn.Sigmoid())

    def forward(self, img):
        return self.model(img)


adversarial_loss = torch.nn.BCELoss()
generator = Generator()
discriminator = Discriminator()
if cuda:
    generator.cuda()
    discriminator.cuda()
    adversarial_loss.cuda()

optimizer_G = torch.optim.Adam(generator.parameters(), lr=0.0002, betas=(0.5, 0.999))
optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=0.0002, betas=(0.5, 0.999))
Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
data = [torch.rand(opt.batch_size, 64, dtype=torch.float64) for _ in range(4)]

for epoch in range(opt.n_epochs):
    for i, imgs in enumerate(data):
        valid = Variable(Tensor(imgs.size(0), 1).fill_(1.0), requires_grad=False)
        fake = Variable(Tensor(imgs.size(0), 1).fill_(0.0), requires_grad=False)
        real_imgs = Variable(imgs.type(Tensor))
        optimizer_G.zero_grad()
        z = Variable(Tensor(np.random.normal(0, 1, (imgs.shape[0], opt.latent_dim))))
        gen_imgs = generator(z)
        g_loss = adversarial_loss(discriminator(gen_imgs), valid)
        g_loss.backward()
        optimizer_G.step()
        optimizer_D.zero_grad()
        real_loss = adversarial_loss(discriminator(real_imgs), valid)
        fake_loss = adversarial_loss(discriminator(gen_imgs.detach()), fake)
        d_loss = (real_loss + fake_loss) / 2
        d_loss.backward()
        optimizer_D.step()
        print(f"[Epoch {epoch}] [Batch {i}] [D loss: {d_loss.item():.4f}] [G loss: {g_loss.item():.4f}]")
