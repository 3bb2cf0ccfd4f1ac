//! When calling an `nn.Module` is calling its `forward` with the module first: what
//! `nn.Module.__call__` (`_wrapped_call_impl`, then `_call_impl`) checks before taking its
//! own shortcut to `forward`. Any hook, a compiled call, JIT tracing, an instance
//! `forward` or a class that overrides the call machinery sends the call through the
//! module itself.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFunction, PyString};
use pyo3::intern;

/// Instance dicts `_call_impl` reads (`self._backward_hooks or ...`).
const INSTANCE_HOOKS: [&str; 4] = ["_backward_hooks", "_backward_pre_hooks", "_forward_hooks", "_forward_pre_hooks"];
/// Module-level dicts of `torch.nn.modules.module` it reads.
const GLOBAL_HOOKS: [&str; 4] =
    ["_global_backward_pre_hooks", "_global_backward_hooks", "_global_forward_hooks", "_global_forward_pre_hooks"];

/// nn.Module's call machinery, loaded once.
pub struct ModuleCall {
    wrapped_call_impl: Py<PyAny>,
    call_impl: Py<PyAny>,
    global_hooks: Vec<Py<PyAny>>,
    instance_hook_names: Vec<Py<PyString>>,
    is_tracing: Py<PyAny>,
}

impl ModuleCall {
    pub fn load(py: Python<'_>) -> PyResult<Self> {
        let torch_module = py.import("torch.nn.modules.module")?;
        let module_class = torch_module.getattr("Module")?;
        let global_hooks = GLOBAL_HOOKS.iter().map(|name| torch_module.getattr(*name).map(Bound::unbind)).collect::<PyResult<_>>()?;
        Ok(Self {
            wrapped_call_impl: module_class.getattr("__call__")?.unbind(),
            call_impl: module_class.getattr("_call_impl")?.unbind(),
            global_hooks,
            instance_hook_names: INSTANCE_HOOKS.iter().map(|name| PyString::intern(py, name).unbind()).collect(),
            is_tracing: py.import("torch._C")?.getattr("_is_tracing")?.unbind(),
        })
    }

    /// `type(module).forward` when `module(*args, **kwargs)` would be
    /// `type(module).forward(module, *args, **kwargs)` with nothing else run; None otherwise.
    pub fn plain_forward<'py>(&self, module: &Bound<'py, PyAny>) -> Option<Bound<'py, PyFunction>> {
        let py = module.py();
        let class = module.get_type();
        if !class.getattr(intern!(py, "__call__")).is_ok_and(|f| f.is(&self.wrapped_call_impl))
            || !class.getattr(intern!(py, "_call_impl")).is_ok_and(|f| f.is(&self.call_impl))
        {
            return None;
        }
        if self.global_hooks.iter().any(|hooks| hooks.bind(py).is_truthy().unwrap_or(true)) {
            return None;
        }
        let instance = module.getattr(intern!(py, "__dict__")).ok()?.cast_into::<PyDict>().ok()?;
        let has_hooks = self.instance_hook_names.iter().any(|name| {
            instance.get_item(name.bind(py)).ok().flatten().is_none_or(|hooks| hooks.is_truthy().unwrap_or(true))
        });
        if has_hooks || instance.contains(intern!(py, "forward")).unwrap_or(true) {
            return None;
        }
        if !module.getattr(intern!(py, "_compiled_call_impl")).is_ok_and(|c| c.is_none()) {
            return None;
        }
        if self.is_tracing.bind(py).call0().ok()?.is_truthy().unwrap_or(true) {
            return None;
        }
        class.getattr(intern!(py, "forward")).ok()?.cast_into::<PyFunction>().ok()
    }
}
