"""Re-creates the sgrvinod SSD300 tutorial's train.py pattern (detection): a module-level `'cuda' if
is_available` device that builds the priors and the loss targets (`torch.FloatTensor(..).to(device)`,
`torch.LongTensor(range(n)).to(device)`), `cudnn.benchmark = True`, a DataLoader with a list-collating
`collate_fn` and `pin_memory=True`, SGD with separate bias groups, and a MultiBox loss with hard-negative
mining (a sort over the priors)."""
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
cudnn.benchmark = True


class Boxes(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        xy = torch.rand(1 + i % 2, 2, generator=g) * 0.5
        return torch.rand(3, 16, 16, generator=g), torch.cat([xy, xy + 0.4], 1), torch.randint(1, 4, (len(xy),), generator=g)

    @staticmethod
    def collate_fn(batch):
        images, boxes, labels = zip(*batch)
        return torch.stack(images), list(boxes), list(labels)


def iou(a, b):
    lo, hi = torch.max(a[:, None, :2], b[None, :, :2]), torch.min(a[:, None, 2:], b[None, :, 2:])
    inter = (hi - lo).clamp(min=0).prod(2)
    area = lambda x: (x[:, 2:] - x[:, :2]).prod(1)
    return inter / (area(a)[:, None] + area(b)[None] - inter)


class SSD(nn.Module):
    def __init__(self, n_classes=4):
        super().__init__()
        self.n_classes = n_classes
        self.base = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.loc, self.cls = nn.Conv2d(8, 4, 3, padding=1), nn.Conv2d(8, n_classes, 3, padding=1)
        c = [(i + 0.5) / 8 for i in range(8)]
        self.priors = torch.FloatTensor([[x - 0.15, y - 0.15, x + 0.15, y + 0.15] for y in c for x in c]).to(device)

    def forward(self, x):
        f = self.base(x)
        return (self.loc(f).permute(0, 2, 3, 1).contiguous().view(len(x), -1, 4),
                self.cls(f).permute(0, 2, 3, 1).contiguous().view(len(x), -1, self.n_classes))


def multibox_loss(priors, locs, scores, boxes, labels, neg_pos_ratio=3):
    n, n_priors = len(locs), len(priors)
    true_locs = torch.zeros((n, n_priors, 4), dtype=torch.float).to(device)
    true_classes = torch.zeros((n, n_priors), dtype=torch.long).to(device)
    for i in range(n):
        overlap = iou(boxes[i], priors)
        overlap_per_prior, obj_per_prior = overlap.max(dim=0)
        _, prior_per_obj = overlap.max(dim=1)
        obj_per_prior[prior_per_obj] = torch.LongTensor(range(len(boxes[i]))).to(device)
        overlap_per_prior[prior_per_obj] = 1.0
        cls = labels[i][obj_per_prior]
        cls[overlap_per_prior < 0.5] = 0
        true_classes[i], true_locs[i] = cls, boxes[i][obj_per_prior] - priors
    positive = true_classes != 0
    loc_loss = F.l1_loss(locs[positive], true_locs[positive])
    conf = F.cross_entropy(scores.view(-1, scores.size(2)), true_classes.view(-1), reduction="none").view(n, -1)
    n_hard = neg_pos_ratio * positive.sum(dim=1)
    conf_neg = conf.clone()
    conf_neg[positive] = 0.0
    conf_neg, _ = conf_neg.sort(dim=1, descending=True)
    ranks = torch.LongTensor(range(n_priors)).unsqueeze(0).expand_as(conf_neg).to(device)
    hard = conf_neg[ranks < n_hard.unsqueeze(1)]
    return (hard.sum() + conf[positive].sum()) / positive.sum().float() + loc_loss


model = SSD().to(device)
biases = [p for name, p in model.named_parameters() if name.endswith(".bias")]
not_biases = [p for name, p in model.named_parameters() if not name.endswith(".bias")]
optimizer = torch.optim.SGD([{"params": biases, "lr": 2e-3}, {"params": not_biases}], lr=1e-3, momentum=0.9)
dataset = Boxes()
loader = torch.utils.data.DataLoader(dataset, batch_size=2, shuffle=True, collate_fn=dataset.collate_fn,
                                     num_workers=0, pin_memory=True)
model.train()
for images, boxes, labels in loader:
    images = images.to(device)
    boxes = [b.to(device) for b in boxes]
    labels = [l.to(device) for l in labels]
    predicted_locs, predicted_scores = model(images)
    loss = multibox_loss(model.priors, predicted_locs, predicted_scores, boxes, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print("loss", loss.item())
