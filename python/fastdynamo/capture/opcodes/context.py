"""``with`` blocks: grad-mode context managers only."""
from __future__ import annotations

from ...exc import unsupported
from ..variables.torch_functions import GradModeVariable


class ContextOpcodes:
    def BEFORE_WITH(self, inst):
        ctx = self.pop()
        if not isinstance(ctx, GradModeVariable):
            raise unsupported(f"with-block over {ctx.describe()}")
        self.push(ctx.var_getattr(self, "__exit__"))
        self.push(ctx.enter(self))
