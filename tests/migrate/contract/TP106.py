"""Legacy CUDA tensor types: `.type(torch.cuda.FloatTensor)`, the string form, constructors, the alias idiom."""
import torch

cuda = torch.cuda.is_available()
Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
x = torch.ones(2, 3).type(torch.cuda.FloatTensor)
y = torch.ones(2).type("torch.cuda.LongTensor")
z = torch.cuda.HalfTensor(2, 3).fill_(1)
noise = Tensor(4, 2).normal_(0, 1)
print(x.device, x.dtype, y.dtype, z.dtype, noise.device, noise.shape)
