"""RandomResizedCrop parameters: same distributions as torchvision's, drawn from (seed, epoch, index) only."""

from __future__ import annotations

import math

import numpy as np
import pytest

from torchport.data.augment import center_params, rrc_params
from torchport.data.rng import permutation, uniforms


def _torchvision_params(h: int, w: int, n: int):
    import torch
    import torchvision.transforms as T

    torch.manual_seed(0)
    img = torch.empty(3, h, w)
    out = np.array([T.RandomResizedCrop.get_params(img, [0.08, 1.0], [3 / 4, 4 / 3]) for _ in range(n)])
    return out  # (n, 4): top, left, height, width


def _ks(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov statistic."""
    grid = np.sort(np.concatenate([a, b]))
    fa = np.searchsorted(np.sort(a), grid, side="right") / len(a)
    fb = np.searchsorted(np.sort(b), grid, side="right") / len(b)
    return float(np.max(np.abs(fa - fb)))


@pytest.mark.parametrize("hw", [(375, 500), (500, 375), (64, 64)])
def test_crop_distributions_match_torchvision(hw):
    h, w = hw
    n = 4000
    tv = _torchvision_params(h, w, n)
    p = rrc_params(np.full(n, h), np.full(n, w), seed=3, epoch=0, indices=np.arange(n))
    ours = np.stack([p.top, p.left, p.height, p.width], 1)
    crit = 1.63 * math.sqrt(2 / n)  # KS critical value at alpha = 0.01
    for name, a, b in [
        ("area", ours[:, 2] * ours[:, 3] / (h * w), tv[:, 2] * tv[:, 3] / (h * w)),
        ("log-ratio", np.log(ours[:, 3] / ours[:, 2]), np.log(tv[:, 3] / tv[:, 2])),
        ("top", ours[:, 0] / h, tv[:, 0] / h),
        ("left", ours[:, 1] / w, tv[:, 1] / w),
    ]:
        assert _ks(a, b) < crit, f"{name} distribution differs from torchvision (KS {_ks(a, b):.3f} >= {crit:.3f})"
    # histograms of crop scale agree bin by bin too
    ha, _ = np.histogram(ours[:, 2] * ours[:, 3] / (h * w), bins=10, range=(0, 1))
    hb, _ = np.histogram(tv[:, 2] * tv[:, 3] / (h * w), bins=10, range=(0, 1))
    assert np.all(np.abs(ha - hb) < 0.03 * n + 4 * np.sqrt(hb + 1))
    # crops always lie inside the image
    assert (p.top >= 0).all() and (p.left >= 0).all()
    assert (p.top + p.height <= h).all() and (p.left + p.width <= w).all()
    assert 0.45 < p.flip.mean() < 0.55


def test_seeded_defect_in_scale_is_detected():
    """A crop sampler with the wrong scale range must fail the same KS check (guards the test itself)."""
    n, h, w = 4000, 375, 500
    tv = _torchvision_params(h, w, n)
    p = rrc_params(np.full(n, h), np.full(n, w), seed=3, epoch=0, indices=np.arange(n), scale=(0.25, 1.0))
    a = p.height * p.width / (h * w)
    assert _ks(a, tv[:, 2] * tv[:, 3] / (h * w)) > 1.63 * math.sqrt(2 / n)


def test_fallback_is_clamped_centre_crop():
    # an extremely wide image: no try fits the ratio range -> centre crop with ratio 4/3
    p = rrc_params(np.array([10]), np.array([1000]), seed=0, epoch=0, indices=np.array([0]), scale=(0.99, 1.0))
    assert (int(p.height[0]), int(p.width[0])) == (10, round(10 * 4 / 3))
    assert int(p.left[0]) == (1000 - p.width[0]) // 2


def test_params_depend_only_on_seed_epoch_index():
    H, W = np.full(6, 300), np.full(6, 400)
    a = rrc_params(H, W, seed=1, epoch=2, indices=np.array([5, 6, 7, 8, 9, 10]))
    b = rrc_params(H[:3], W[:3], seed=1, epoch=2, indices=np.array([8, 9, 10]))  # other batch layout
    assert np.array_equal(a.top[3:], b.top) and np.array_equal(a.width[3:], b.width) and np.array_equal(a.flip[3:], b.flip)
    c = rrc_params(H, W, seed=1, epoch=3, indices=np.array([5, 6, 7, 8, 9, 10]))
    assert not np.array_equal(a.top, c.top)


def test_center_params():
    p = center_params(np.array([100, 80]), np.array([200, 80]), crop_fraction=0.5)
    assert p.height.tolist() == [50, 40] and p.width.tolist() == [50, 40]
    assert p.top.tolist() == [25, 20] and p.left.tolist() == [75, 20]


def test_rng_is_uniform_and_permutation_is_valid():
    u = uniforms(0, 0, np.arange(20000), 2)
    assert abs(u.mean() - 0.5) < 0.01 and u.min() >= 0 and u.max() < 1
    p = permutation(1000, seed=4, epoch=1)
    assert sorted(p.tolist()) == list(range(1000))
    assert np.array_equal(p, permutation(1000, seed=4, epoch=1))
    assert not np.array_equal(p, permutation(1000, seed=4, epoch=2))
    # pinned values: the stream must not change across platforms / numpy versions
    assert permutation(8, seed=0, epoch=0).tolist() == [2, 0, 3, 1, 5, 6, 4, 7]


def test_enlarging_crops_use_plain_bilinear_with_identical_bytes():
    """resize_into switches to torch's non-antialiased kernel when the crop is enlarged both ways: same bytes."""
    import torch
    import torch.nn.functional as F

    from torchport.data.augment import resize_into

    rng = np.random.default_rng(0)
    src = rng.integers(0, 256, (90, 120, 3), dtype=np.uint8)
    for box, out in [((3, 5, 40, 60), (64, 64)), ((0, 0, 90, 120), (96, 128)), ((10, 7, 64, 30), (64, 48)),
                     ((10, 7, 80, 100), (64, 64))]:  # the last one shrinks: antialiased kernel
        for flip in (False, True):
            dst = torch.empty((3,) + out, dtype=torch.uint8)
            resize_into(dst, src, box, flip)
            t, l_, h, w = box
            x = torch.from_numpy(np.ascontiguousarray(src[t : t + h, l_ : l_ + w])).permute(2, 0, 1)[None].float()
            ref = F.interpolate(x, size=out, mode="bilinear", antialias=True, align_corners=False)[0]
            ref = ref.flip(-1) if flip else ref
            assert (dst.float() - ref).abs().max() <= 1.0  # uint8 kernel rounding vs the float reference
            crop = torch.from_numpy(np.ascontiguousarray(src[t : t + h, l_ : l_ + w]))
            xc = crop.as_strided((1, 3, h, w), (h * w * 3, 1, w * 3, 3))
            exact = F.interpolate(xc, size=out, mode="bilinear", antialias=True, align_corners=False)[0]
            assert torch.equal(dst, exact.flip(-1) if flip else exact)  # bit-identical to the antialiased uint8 kernel
