import os, time
t = time.perf_counter()
import torch
t1 = time.perf_counter()
torch.ones(1, device="cuda").sum().item()
t2 = time.perf_counter()
print(f"{os.environ.get('TAG')}: import {t1 - t:.3f}s first kernel {t2 - t1:.3f}s", flush=True)
