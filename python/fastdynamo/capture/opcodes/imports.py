"""``import`` statements of modules that are already imported.

``IMPORT_NAME`` is modelled only when every module it would return is in
``sys.modules`` already (and every name of a ``from`` list is an attribute): then the
statement has no effect but the lookup, and the trace uses the module object. A module
of a trusted library or of the standard library is used as a constant, like the ones
reached through globals; any other module must also be a global of the frame's module
(the import then returns that global's value, guarded by identity), so that attribute
reads from it are guarded. Anything else (a first import, an import hook) breaks the
graph: importing runs module code.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
import types

from ...exc import unsupported
from ..builder import GlobalsSource, wrap_value
from ..variables.misc import PythonModuleVariable, is_trusted_module

_STDLIB = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep


def _is_standard_library(module: types.ModuleType) -> bool:
    if module.__name__ in sys.builtin_module_names or module.__name__ in sys.stdlib_module_names:
        return True
    file = getattr(module, "__file__", None)
    if not file:
        return False
    return os.path.realpath(file).startswith(_STDLIB) and "site-packages" not in file


def _is_constant_module(module: types.ModuleType) -> bool:
    """Trusted libraries and the standard library: read without guards, like the
    modules reached through globals."""
    return is_trusted_module(module.__name__) or _is_standard_library(module)


class ImportOpcodes:
    # from InstructionTranslator, which mixes this class in
    code: types.CodeType
    f_globals: dict
    globals_source: GlobalsSource

    def IMPORT_NAME(self, inst):
        fromlist = self.pop().as_python_constant()
        level = self.pop().as_python_constant()
        name = inst.argval
        absolute = self._absolute_module_name(name, level)
        module = sys.modules.get(absolute)
        if module is None:
            raise unsupported(f"import of {absolute}: not imported yet (importing runs module code)")
        if fromlist:
            for attr in fromlist:
                if attr == "*" or not hasattr(module, attr):
                    raise unsupported(f"from {absolute} import {attr}: not an attribute yet")
            # Only IMPORT_FROM reads it (then POP_TOP): each name is checked there.
            self.push(self._module_variable(module, required=False))
            return
        top = sys.modules.get(absolute.partition(".")[0])
        if top is None:
            raise unsupported(f"import of {absolute}: its package is not imported")
        self.push(self._module_variable(top))

    def IMPORT_FROM(self, inst):
        module = self.stack[-1]
        if not isinstance(module, PythonModuleVariable):
            raise unsupported(f"from-import from {module.describe()}")
        value = getattr(module.module, inst.argval, None)
        if isinstance(value, types.ModuleType):
            self.push(self._module_variable(value))  # a submodule: guarded on its own
            return
        if not self._readable(module):
            raise unsupported(f"from {module.module.__name__} import {inst.argval}: the package is not "
                              f"a global of {self.code.co_filename}, so the read cannot be guarded")
        self.push(module.var_getattr(self, inst.argval))

    def _absolute_module_name(self, name: str, level: int) -> str:
        if not level:
            return name
        package = self.f_globals.get("__package__") or self.f_globals.get("__name__", "").rpartition(".")[0]
        try:
            return importlib.util.resolve_name("." * level + name, package)
        except (ImportError, ValueError) as err:
            raise unsupported(f"relative import of {name!r}: {err}") from err

    def _readable(self, module: PythonModuleVariable) -> bool:
        """Attributes of ``module`` can be read: it is trusted or guarded through a source."""
        trusted_code = not self.globals_source.root and self.globals_source.base is None
        return module.source is not None or _is_constant_module(module.module) or trusted_code

    def _module_variable(self, module: types.ModuleType, required: bool = True) -> PythonModuleVariable:
        """``module`` as a value of the trace; with ``required`` False an unguardable
        user module is returned without a source (only ``IMPORT_FROM`` reads it, which
        refuses names it cannot guard)."""
        if _is_constant_module(module):
            return PythonModuleVariable(module)
        for global_name, value in self.f_globals.items():
            if value is module:
                # Library code inlined without guards has no source: its module is trusted.
                variable = wrap_value(self, module, self.globals_source.for_global(global_name))
                assert isinstance(variable, PythonModuleVariable)
                return variable
        if not required:
            return PythonModuleVariable(module)
        raise unsupported(f"import of {module.__name__}: the module is not a global of "
                          f"{self.code.co_filename}, so reads from it cannot be guarded")
