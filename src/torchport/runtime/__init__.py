"""Runtime layer: the public surface training code imports (device, AMP, loader, seed, memory, distributed, checkpoint)."""
