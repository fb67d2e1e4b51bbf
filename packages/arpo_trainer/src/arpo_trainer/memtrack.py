"""Peak tensor memory of a piece of code, on CPU as on GPU, counted from the tensors themselves.

On a GPU, PyTorch's caching allocator reports what it handed out (``torch.cuda.
max_memory_allocated``). On CPU there is no such counter, and the process's resident size mixes
tensors with the Python heap, the libraries and freed pages the allocator keeps. :class:`TensorPeak`
counts instead: every tensor an operator creates inside the context is recorded by its storage
(views share one), added to the live total, and subtracted when the storage is freed; the peak of
that total is the answer. Tensors that existed before (weights, optimizer states) are added with
:meth:`TensorPeak.track`. This is the quantity a GPU allocator would have to hold, without its
rounding to 512-byte blocks and its cached free blocks.

>>> import torch
>>> x = torch.ones(1024)  # 4 KiB, created before: tracked by hand
>>> with TensorPeak() as mem:
...     _ = mem.track(x)
...     y = x * 2  # +4 KiB
...     del y  # freed
...     z = torch.cat([x, x])  # +8 KiB
>>> mem.peak, mem.current
(12288, 12288)
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class TensorPeak(TorchDispatchMode):
    """Live and peak bytes of tensor storages on one device type (see the module docstring).

    Args:
        device_type: count storages on this device type only (``"cpu"``, ``"cuda"``).
    """

    def __init__(self, device_type: str = "cpu"):
        super().__init__()
        self.device_type = device_type
        self.current = 0
        self.peak = 0
        self._live: dict[int, int] = {}

    def reset_peak(self) -> None:
        """Start a new peak from the current live total."""
        self.peak = self.current

    def track(self, *objects: Any) -> int:
        """Count tensors that already exist (in modules, optimizers, dicts, lists); returns the
        bytes added."""
        before = self.current
        for obj in objects:
            for t in _tensors(obj):
                self._add(t)
        return self.current - before

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self._add(t)
        return out

    def _add(self, t: torch.Tensor) -> None:
        if t.device.type != self.device_type or t.is_meta:
            return
        try:
            storage = t.untyped_storage()
        except (NotImplementedError, RuntimeError):  # sparse and other storage-less tensors
            return
        key = id(storage)
        if key in self._live:
            return
        nbytes = storage.nbytes()
        self._live[key] = nbytes
        self.current += nbytes
        self.peak = max(self.peak, self.current)
        weakref.finalize(storage, self._free, key)

    def _free(self, key: int) -> None:
        self.current -= self._live.pop(key, 0)


def _tensors(obj: Any):
    """Every tensor in ``obj``: a tensor, a module (parameters, gradients, buffers), an optimizer
    (its states), or a dict / list / tuple of those."""
    if isinstance(obj, torch.Tensor):
        yield obj
        if obj.grad is not None:
            yield obj.grad
    elif isinstance(obj, torch.nn.Module):
        for p in obj.parameters():
            yield from _tensors(p)
        yield from obj.buffers()
    elif isinstance(obj, torch.optim.Optimizer):
        for state in obj.state.values():
            yield from _tensors(state)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v)
    elif isinstance(obj, list | tuple):
        for v in obj:
            yield from _tensors(v)
