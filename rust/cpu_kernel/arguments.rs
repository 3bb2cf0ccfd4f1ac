//! The arrays a kernel is called with, and its int arguments.

use crate::errors::Error;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt};
use pyo3::Borrowed;

/// Arrays up to this length live on the stack.
const INLINE: usize = 16;

/// A zeroed array of `len` values: inline up to [`INLINE`], else on the heap.
pub struct Scratch<T> {
    inline: [T; INLINE],
    heap: Vec<T>,
    len: usize,
}

impl<T: Copy + Default> Scratch<T> {
    #[inline]
    pub fn new(len: usize) -> Self {
        let heap = if len > INLINE {
            vec![T::default(); len]
        } else {
            Vec::new()
        };
        Scratch {
            inline: [T::default(); INLINE],
            heap,
            len,
        }
    }

    #[inline]
    pub fn as_slice(&self) -> &[T] {
        if self.len > INLINE {
            &self.heap
        } else {
            &self.inline[..self.len]
        }
    }

    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        if self.len > INLINE {
            &mut self.heap
        } else {
            &mut self.inline[..self.len]
        }
    }
}

/// The int at `position` (the kernel's `sizes[index]`): an `int` (not a `bool`) that
/// fits an int64.
#[inline]
pub fn int_argument(
    kernel: &str,
    position: usize,
    index: usize,
    value: Borrowed<'_, '_, PyAny>,
) -> PyResult<i64> {
    if value.is_exact_instance_of::<PyInt>() {
        if let Ok(int) = value.extract::<i64>() {
            return Ok(int);
        }
    }
    other_int(kernel, position, index, value)
}

/// An `int` subclass other than `bool`, or why `value` is not an int argument.
#[cold]
#[inline(never)]
fn other_int(
    kernel: &str,
    position: usize,
    index: usize,
    value: Borrowed<'_, '_, PyAny>,
) -> PyResult<i64> {
    let at = format!("{kernel}(): the int at position {position} (sizes[{index}])");
    if value.is_instance_of::<PyInt>() && !value.is_instance_of::<PyBool>() {
        return value.extract::<i64>().map_err(|_| {
            Error::Overflow(format!("{at} does not fit in int64: {}", *value)).into()
        });
    }
    let got = value
        .get_type()
        .qualname()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string());
    Err(Error::WrongType(format!("{at} must be an int, got {got}")).into())
}

#[cfg(test)]
mod tests {
    use super::Scratch;

    #[test]
    fn scratch_is_zeroed_and_as_long_as_asked_inline_and_on_the_heap() {
        for len in [0, 1, super::INLINE, super::INLINE + 1, 40] {
            let mut scratch = Scratch::<i64>::new(len);
            assert_eq!(scratch.as_slice(), vec![0; len].as_slice());
            for (index, value) in scratch.as_mut_slice().iter_mut().enumerate() {
                *value = i64::try_from(index).expect("small") - 3;
            }
            let expected: Vec<i64> = (0..len)
                .map(|i| i64::try_from(i).expect("small") - 3)
                .collect();
            assert_eq!(scratch.as_slice(), expected.as_slice());
        }
    }
}
