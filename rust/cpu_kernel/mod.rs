//! `CpuKernel`: calls one kernel of a library the C++ CPU code generator compiled, from
//! the generated Python wrapper, with as little in between as we can: vectorcall, each
//! tensor's data address read in place ([`tensor_argument`], calibrated by
//! [`data_layout`]), the int arguments into an int64 array, one C call.
//!
//! Every generated kernel has one ABI, `extern "C" void kernel(void* const* buffers,
//! const int64_t* sizes)` (`ffi::kernel`): `buffers[i]` is `data_ptr()` of the i-th
//! tensor argument, `sizes[j]` the j-th int argument. Each tensor is checked to be a CPU
//! tensor of its declared dtype (a wrong dtype would make the kernel read its memory
//! wrongly); sizes and strides are not checked: the wrapper's guards and allocations
//! guarantee them.

mod arguments;
pub(crate) mod data_layout;
mod tensor_argument;

use crate::errors::Error;
use crate::ffi::kernel::KernelFunction;
use crate::ffi::object::{ArgumentBuffer, Arguments};
use crate::ffi::vectorcall::{self, Binding, VectorcallSlot, VectorcallTarget};
use arguments::{int_argument, Scratch};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyTuple};
use pyo3::{Borrowed, PyTraverseError, PyVisit};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tensor_argument::{python_data_pointer, InPlaceReader, TensorSlot};

/// Tests: every tensor argument's address is asked of torch in Python.
static FORCE_PYTHON: AtomicBool = AtomicBool::new(false);

/// A generated CPU kernel, called as `kernel(t0, ..., tN-1, i0, ..., iM-1)`.
///
/// `address` is the C function's (`ctypes.cast(lib.kernel0, ctypes.c_void_p).value`),
/// `dtypes` the declared dtype of each tensor argument, `int_count` the number of int
/// arguments after them; `owner` (the `ctypes.CDLL`) is kept alive so that the library
/// stays mapped. With `release_gil`, the GIL is released while the kernel runs.
///
/// A call checks that each tensor argument is a CPU tensor of its declared dtype and
/// each int argument an int (a `TypeError` naming the kernel and the position otherwise;
/// the kernel is not called). Sizes and strides are not checked: the caller guarantees
/// them, and that the kernel reads no more than they allow.
///
/// ```python
/// lib = ctypes.CDLL(path)
/// add = CpuKernel(ctypes.cast(lib.add, ctypes.c_void_p).value, "add",
///                 [torch.float32] * 3, 1, lib)
/// add(x, y, out, x.numel())
/// ```
#[pyclass(frozen, module = "fastdynamo._native")]
pub struct CpuKernel {
    vectorcall: VectorcallSlot,
    function: KernelFunction,
    address: usize,
    name: String,
    tensors: Vec<TensorSlot>,
    int_count: usize,
    release_gil: bool,
    /// None: the layout is not verified, every address is asked of torch.
    reader: Option<InPlaceReader>,
    owner: Py<PyAny>,
    python_reads: AtomicU64,
}

#[pymethods]
impl CpuKernel {
    #[new]
    #[pyo3(signature = (address, name, dtypes, int_count, owner, release_gil = false))]
    fn new(
        address: &Bound<'_, PyAny>,
        name: String,
        dtypes: &Bound<'_, PyAny>,
        int_count: &Bound<'_, PyAny>,
        owner: Py<PyAny>,
        release_gil: bool,
    ) -> PyResult<CpuKernel> {
        let py = address.py();
        let address = kernel_address(address)?;
        if name.is_empty() {
            return Err(Error::BadValue("a kernel's name must not be empty".to_owned()).into());
        }
        let int_count = count(int_count)?;
        let reader = data_layout::data_layout(py).map(|layout| layout.reader);
        let mut tensors = Vec::new();
        for dtype in dtypes.try_iter()? {
            tensors.push(TensorSlot::new(&dtype?, reader.as_ref())?);
        }
        Ok(CpuKernel::around(
            KernelFunction::at_address(address),
            address.get(),
            name,
            tensors,
            int_count,
            owner,
            release_gil,
            reader,
        ))
    }

    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        &self,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        let values: Vec<Bound<'_, PyAny>> = args.iter().collect();
        let mut buffer = ArgumentBuffer::with_capacity(values.len());
        for value in &values {
            buffer.push(value.as_borrowed());
        }
        self.launch(
            args.py(),
            buffer.arguments(),
            kwargs.map_or(0, PyDictMethods::len),
        )
    }

    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The C function's address.
    #[getter]
    fn address(&self) -> usize {
        self.address
    }

    #[getter]
    fn dtypes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.tensors.iter().map(|slot| slot.dtype.bind(py)))
    }

    #[getter]
    fn int_count(&self) -> usize {
        self.int_count
    }

    #[getter]
    fn release_gil(&self) -> bool {
        self.release_gil
    }

    /// Tensor arguments whose address was asked of torch in Python (not read in place).
    #[getter]
    fn python_reads(&self) -> u64 {
        self.python_reads.load(Ordering::Relaxed)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.owner)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let dtypes: Vec<String> = self
            .tensors
            .iter()
            .map(|slot| slot.dtype.bind(py).to_string())
            .collect();
        format!(
            "<CpuKernel {}({}; int_count={})>",
            self.name,
            dtypes.join(", "),
            self.int_count
        )
    }
}

impl VectorcallTarget for CpuKernel {
    fn vectorcall<'py>(
        callable: Borrowed<'_, 'py, PyAny>,
        args: Arguments<'_>,
        positional: usize,
        kwnames: Option<Borrowed<'_, 'py, PyTuple>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = callable.py();
        let kernel = callable.cast::<CpuKernel>()?;
        kernel.get().launch(
            py,
            args.prefix(positional),
            kwnames.map_or(0, |names| names.len()),
        )?;
        Ok(py.None().into_bound(py))
    }
}

impl CpuKernel {
    #[allow(clippy::too_many_arguments)]
    fn around(
        function: KernelFunction,
        address: usize,
        name: String,
        tensors: Vec<TensorSlot>,
        int_count: usize,
        owner: Py<PyAny>,
        release_gil: bool,
        reader: Option<InPlaceReader>,
    ) -> CpuKernel {
        CpuKernel {
            vectorcall: VectorcallSlot::new::<CpuKernel>(),
            function,
            address,
            name,
            tensors,
            int_count,
            release_gil,
            reader,
            owner,
            python_reads: AtomicU64::new(0),
        }
    }

    /// Checks the arguments and calls the kernel; nothing is called if one is wrong.
    #[inline]
    fn launch(&self, py: Python<'_>, args: Arguments<'_>, keywords: usize) -> PyResult<()> {
        let tensor_count = self.tensors.len();
        if keywords != 0 || args.len() != tensor_count + self.int_count {
            return Err(self.wrong_arguments(args.len(), keywords));
        }
        let reader = self
            .reader
            .as_ref()
            .filter(|_| !FORCE_PYTHON.load(Ordering::Relaxed));
        let mut buffers = Scratch::<usize>::new(tensor_count);
        for ((position, slot), address) in
            self.tensors.iter().enumerate().zip(buffers.as_mut_slice())
        {
            let value = args.get(py, position).expect("counted above");
            let in_place = match (reader, slot.meta) {
                (Some(reader), Some(meta)) => reader.data_pointer(&value, meta, slot.itemsize),
                _ => None,
            };
            *address = match in_place {
                Some(found) => found,
                None => self.python_data_pointer(position, slot, value)?,
            };
        }
        let mut sizes = Scratch::<i64>::new(self.int_count);
        for (index, size) in sizes.as_mut_slice().iter_mut().enumerate() {
            let position = tensor_count + index;
            *size = int_argument(
                &self.name,
                position,
                index,
                args.get(py, position).expect("counted above"),
            )?;
        }
        let (function, buffers, sizes) = (self.function, buffers.as_slice(), sizes.as_slice());
        if self.release_gil {
            py.detach(|| function.call(buffers, sizes));
        } else {
            function.call(buffers, sizes);
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn python_data_pointer(
        &self,
        position: usize,
        slot: &TensorSlot,
        value: Borrowed<'_, '_, PyAny>,
    ) -> PyResult<usize> {
        self.python_reads.fetch_add(1, Ordering::Relaxed);
        python_data_pointer(&self.name, position, slot, value)
    }

    #[cold]
    #[inline(never)]
    fn wrong_arguments(&self, given: usize, keywords: usize) -> PyErr {
        if keywords != 0 {
            return Error::WrongType(format!("{}() takes no keyword arguments", self.name)).into();
        }
        let (tensors, ints) = (self.tensors.len(), self.int_count);
        let plural = |count: usize, what: &str| {
            format!("{count} {what}{}", if count == 1 { "" } else { "s" })
        };
        Error::WrongType(format!(
            "{}() takes {} ({}, then {}) but {given} were given",
            self.name,
            plural(tensors + ints, "positional argument"),
            plural(tensors, "tensor"),
            plural(ints, "int"),
        ))
        .into()
    }
}

/// A kernel's address: a positive int.
fn kernel_address(address: &Bound<'_, PyAny>) -> PyResult<NonZeroUsize> {
    if !address.is_instance_of::<PyInt>() {
        let got = address
            .get_type()
            .qualname()
            .map_or_else(|_| "?".to_owned(), |n| n.to_string());
        return Err(
            Error::WrongType(format!("a kernel's address must be an int, got {got}")).into(),
        );
    }
    let value = address.extract::<usize>().ok().and_then(NonZeroUsize::new);
    value.ok_or_else(|| {
        Error::BadValue(format!(
            "a kernel's address must be a positive int, got {address}"
        ))
        .into()
    })
}

/// A count of arguments: a non-negative int.
fn count(value: &Bound<'_, PyAny>) -> PyResult<usize> {
    if !value.is_instance_of::<PyInt>() {
        let got = value
            .get_type()
            .qualname()
            .map_or_else(|_| "?".to_owned(), |n| n.to_string());
        return Err(Error::WrongType(format!("int_count must be an int, got {got}")).into());
    }
    let count = value.extract::<usize>().ok().filter(|&c| c <= 1 << 20);
    count.ok_or_else(|| {
        Error::BadValue(format!(
            "int_count must be between 0 and 2**20, got {value}"
        ))
        .into()
    })
}

/// Tests: ask torch for every tensor argument's address (`True`) or read them in place
/// where the layout allows (`False`); returns the previous setting.
#[pyfunction]
fn _cpu_kernel_force_python(enabled: bool) -> bool {
    FORCE_PYTHON.swap(enabled, Ordering::Relaxed)
}

/// Where tensors' data addresses are read in place (byte offsets), or None when that
/// layout could not be verified and every address is asked of torch.
#[pyfunction]
fn _cpu_kernel_data_layout(
    py: Python<'_>,
) -> Option<std::collections::HashMap<&'static str, usize>> {
    data_layout::data_layout(py).map(|layout| layout.offsets.clone())
}

/// Registers `CpuKernel` and makes its type vectorcall (once, on a kernel doing nothing:
/// every instance has its slot at the same place).
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add_class::<CpuKernel>()?;
    module.add_function(wrap_pyfunction!(_cpu_kernel_force_python, module)?)?;
    module.add_function(wrap_pyfunction!(_cpu_kernel_data_layout, module)?)?;
    let noop = KernelFunction::noop();
    let first = Bound::new(
        py,
        CpuKernel::around(
            noop,
            0,
            "noop".to_owned(),
            Vec::new(),
            0,
            py.None(),
            false,
            None,
        ),
    )?;
    vectorcall::enable(first.as_any(), &first.get().vectorcall, Binding::Never)
}
