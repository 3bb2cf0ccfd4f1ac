"""What a code generator plugs into the shared pipeline: a renderer and a target.

The kernel IR, lowering and fusion (this package) know no language. A **renderer** turns
one fused group into kernel source and says how the generated wrapper module declares
and launches its kernels; a **target** says which inputs its kernels can run on and
what, besides the graph, its generated code depends on (versions, options: the cache
key). ``backends/triton`` and ``backends/cpp`` are the two implementations; the
pipeline (:mod:`compiler`, :mod:`wrapper`) calls only what is declared here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Hashable, Protocol

import torch

from .indexing import Spelling
from .sizes import Size

if TYPE_CHECKING:  # annotations only: fusion imports nothing of this module
    from .fusion import KernelGroup, Schedule


@dataclass
class RenderedKernel:
    """One kernel's source and how it is called: ``params`` are the buffer names, then
    the size symbols, in the kernel's argument order; ``xnumel``/``rnumel`` its rows and
    row length (an expression over the size symbols when sizes are arguments)."""

    name: str
    source: str
    params: list
    xnumel: Size
    rnumel: Size
    size_params: list = field(default_factory=list)


class Renderer(Protocol):
    """Kernel source, the generated module's header and kernel section, launch lines."""

    #: how the language writes index and size arithmetic (the expression printer)
    spelling: Spelling

    def module_header(self) -> str:
        """The first lines of the generated module (imports)."""
        ...

    def render_kernel(self, schedule: Schedule, group: KernelGroup) -> RenderedKernel:
        """The source of the kernel that computes ``group``."""
        ...

    def kernel_section(self, kernels: list[RenderedKernel]) -> str:
        """Module-level code that defines every kernel so that launch lines can run it."""
        ...

    def forward_prologue(self, inputs: list[str]) -> list[str]:
        """Statements at the start of ``forward`` (what launches and allocations read);
        ``inputs`` are the names of the tensor inputs."""
        ...

    def launch_line(self, kernel: RenderedKernel, size_arguments: str) -> str:
        """The statement in the wrapper's body that runs ``kernel`` (without indentation);
        ``size_arguments`` is the Python source of its symbolic ``xnumel``/``rnumel``
        keyword arguments (empty for static sizes)."""
        ...

    def allocation(self, name: str, shape: str, stride: str, dtype: torch.dtype) -> str:
        """The statement that allocates the buffer ``name`` (shape and stride as source)."""
        ...


class KernelTarget(Protocol):
    """A language and the devices its kernels run on."""

    @property
    def name(self) -> str:
        """"triton", "cpp": names its logger (``fastdynamo.backends.<name>``) and cache keys."""
        ...

    @property
    def options(self) -> Hashable:
        """Knobs that change generated code; part of the cache key."""
        ...

    @property
    def channels_last(self) -> bool:
        """Whether 2-d convolutions read channels-last inputs (:func:`lowering.trace_aten`)."""
        ...

    def renderer(self) -> Renderer:
        ...

    def device_reason(self, device: torch.device) -> str | None:
        """Why inputs on ``device`` cannot run this target's kernels, or None."""
        ...

    def process_wide(self, reason: str) -> bool:
        """Whether ``reason`` holds for every graph of the process (logged once)."""
        ...

    def key_parts(self, device: torch.device) -> tuple:
        """What generated code depends on besides the graph: versions, the device."""
        ...

    def chooses(self, device: torch.device) -> bool:
        """Whether a graph on ``device`` runs its kernels only where they pay
        (:mod:`choice`); False: always the kernels (an explicitly chosen code generator)."""
        ...
