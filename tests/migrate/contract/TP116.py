"""Streams and events: a side stream, events around work, the current and default streams."""
import torch

s = torch.cuda.Stream()
x = torch.randn(32, 32).cuda()


def timed():
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    with torch.cuda.stream(s):
        y = x @ x
    torch.cuda.current_stream().wait_stream(s)
    end.record()
    end.synchronize()
    return y, start.elapsed_time(end) >= 0


y, timing_ok = timed()
default = torch.cuda.default_stream()
print(y.device, timing_ok, default is not None)
