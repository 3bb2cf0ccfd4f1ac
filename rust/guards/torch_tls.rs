//! Fast readers of torch's thread-local modes for the state guards, accepted only after
//! they agree with torch's own Python readers (`torch.is_grad_enabled()`,
//! `torch.is_inference_mode_enabled()`, `torch._C._is_any_autocast_enabled()`) with each
//! mode switched on and off. Calibrated once per process, on the first guard set with
//! state checks; None (the Python readers are used) when anything does not match.

use crate::ffi::torch_tls::{ThreadState, TorchTls};
use pyo3::prelude::*;
use std::sync::OnceLock;

pub struct FastTorchState {
    tls: TorchTls,
    /// The `Autocast*` dispatch keys: autocast is on when one is not excluded.
    autocast_keys: Vec<u16>,
    /// Their bits in the raw thread-local key set words, and what those bits hold when
    /// every one is excluded; None: test the keys one by one.
    autocast_bits: Option<([u64; 2], [u64; 2])>,
    /// Where grad and inference mode lie in `c10::AutogradState`; None: ask libc10.
    mode_bits: Option<ModeBits>,
}

/// A flag's byte offset in `c10::AutogradState` and its bit there.
#[derive(Clone, Copy)]
struct Flag {
    offset: usize,
    mask: u8,
}

impl Flag {
    fn read(self, state: ThreadState) -> Option<bool> {
        state.autograd_byte(self.offset).map(|byte| byte & self.mask != 0)
    }
}

#[derive(Clone, Copy)]
struct ModeBits {
    grad: Flag,
    inference: Flag,
}

/// The three modes the state guards check, read together.
#[derive(Clone, Copy)]
pub struct Modes {
    pub grad: bool,
    pub inference: bool,
    pub autocast: bool,
}

impl FastTorchState {
    pub fn grad_enabled(&self) -> bool {
        self.tls.grad_mode()
    }

    pub fn inference_mode(&self) -> bool {
        self.tls.inference_mode()
    }

    /// The default dtype's `c10::ScalarType` code (checked against torch's Python reader
    /// where a guard uses it: `check.rs`'s `DefaultDtype`).
    #[inline]
    pub fn default_scalar_type(&self) -> Option<i8> {
        self.tls.default_scalar_type()
    }

    /// True when autocast is on for any device (a superset of what
    /// `_is_any_autocast_enabled` checks: a key it ignores can only make a guard fail).
    pub fn autocast_enabled(&self) -> bool {
        if let Some((mask, off)) = self.autocast_bits {
            if let Some(words) = self.tls.raw_key_sets() {
                return (words[0] & mask[0], words[1] & mask[1]) != (off[0], off[1]);
            }
        }
        self.autocast_keys_enabled()
    }

    /// All three modes from one thread-local read (calibrated bits), or None. Always
    /// inlined into the guard check (a call here cost more than the reads).
    #[allow(clippy::inline_always)]
    #[inline(always)]
    pub fn modes(&self) -> Option<Modes> {
        let (bits, (mask, off)) = (self.mode_bits?, self.autocast_bits?);
        let state = self.tls.thread_state()?;
        let words = state.key_sets();
        Some(Modes {
            grad: bits.grad.read(state)?,
            inference: bits.inference.read(state)?,
            autocast: (words[0] & mask[0], words[1] & mask[1]) != (off[0], off[1]),
        })
    }

    fn autocast_keys_enabled(&self) -> bool {
        self.autocast_keys.iter().any(|&key| !self.tls.key_excluded(key))
    }
}

static FAST: OnceLock<Option<FastTorchState>> = OnceLock::new();

/// The calibrated readers, or None.
pub fn fast_state(py: Python<'_>) -> Option<&'static FastTorchState> {
    if let Some(done) = FAST.get() {
        return done.as_ref();
    }
    let calibrated = calibrate(py).ok().flatten();
    FAST.get_or_init(|| calibrated).as_ref()
}

fn calibrate(py: Python<'_>) -> PyResult<Option<FastTorchState>> {
    let torch = py.import("torch")?;
    let path = py.import("os.path")?;
    let library = path.call_method1("join", (path.call_method1("dirname", (torch.getattr("__file__")?,))?, "lib", "libc10.so"))?;
    let Some(tls) = TorchTls::open(&library.extract::<String>()?) else { return Ok(None) };
    if !grad_mode_agrees(&torch, &tls)? || !inference_mode_agrees(&torch, &tls)? {
        return Ok(None);
    }
    let Some(autocast_keys) = autocast_keys(&torch, &tls)? else { return Ok(None) };
    let mut fast = FastTorchState { tls, autocast_keys, autocast_bits: None, mode_bits: None };
    if !autocast_agrees(&torch, &mut fast)? {
        return Ok(None);
    }
    fast.autocast_bits = autocast_bits(&torch, &fast)?;
    fast.mode_bits = mode_bits(&torch, &fast.tls)?;
    Ok(Some(fast))
}

/// The `AutogradState` bytes from its start up to the key set words (at most 64).
fn autograd_bytes(state: ThreadState) -> Vec<u8> {
    (0..state.autograd_span().min(64)).map_while(|offset| state.autograd_byte(offset)).collect()
}

/// The one bit set in `after` and not in `before`, if exactly one.
fn one_new_bit(before: &[u8], after: &[u8]) -> Option<Flag> {
    let mut found = None;
    for (offset, (old, new)) in before.iter().zip(after).enumerate() {
        let risen = new & !old;
        if risen.count_ones() > 1 || (risen != 0 && found.is_some()) {
            return None;
        }
        if risen != 0 {
            found = Some(Flag { offset, mask: risen });
        }
    }
    found
}

/// Grad mode's bit: the only one that rises when grad mode is switched on, and nothing
/// else changes; inference mode's: the only one that rises on entering inference mode
/// (which clears grad mode and others). Then both readers must agree with torch's in every
/// state; None when anything differs (the guards ask libc10 instead).
fn mode_bits(torch: &Bound<'_, PyModule>, tls: &TorchTls) -> PyResult<Option<ModeBits>> {
    let Some(state) = tls.thread_state() else { return Ok(None) };
    let set_grad = torch.getattr("_C")?.getattr("_set_grad_enabled")?;
    let before: bool = torch.call_method0("is_grad_enabled")?.extract()?;
    set_grad.call1((false,))?;
    let off = autograd_bytes(state);
    set_grad.call1((true,))?;
    let on = autograd_bytes(state);
    let inference = torch.call_method1("inference_mode", (true,))?;
    inference.call_method0("__enter__")?;
    let inside = autograd_bytes(state);
    let none = || torch.py().None().into_bound(torch.py());
    inference.call_method1("__exit__", (none(), none(), none()))?;
    set_grad.call1((before,))?;
    let changed = off.iter().zip(&on).filter(|(a, b)| a != b).count();
    let (Some(grad), Some(inference), 1) = (one_new_bit(&off, &on), one_new_bit(&on, &inside), changed) else {
        return Ok(None);
    };
    let bits = ModeBits { grad, inference };
    Ok(modes_agree(torch, state, bits)?.then_some(bits))
}

fn modes_agree(torch: &Bound<'_, PyModule>, state: ThreadState, bits: ModeBits) -> PyResult<bool> {
    let read = |flag: Flag| flag.read(state);
    let python = |name: &str| -> PyResult<Option<bool>> { Ok(Some(torch.call_method0(name)?.extract()?)) };
    let set_grad = torch.getattr("_C")?.getattr("_set_grad_enabled")?;
    let before: bool = torch.call_method0("is_grad_enabled")?.extract()?;
    let mut agrees = true;
    for mode in [true, false] {
        set_grad.call1((mode,))?;
        agrees &= read(bits.grad) == python("is_grad_enabled")? && read(bits.grad) == Some(mode);
    }
    set_grad.call1((before,))?;
    let inference = torch.call_method1("inference_mode", (true,))?;
    inference.call_method0("__enter__")?;
    agrees &= read(bits.inference) == Some(true) && python("is_inference_mode_enabled")? == Some(true);
    agrees &= read(bits.grad) == python("is_grad_enabled")?;
    let none = || torch.py().None().into_bound(torch.py());
    inference.call_method1("__exit__", (none(), none(), none()))?;
    Ok(agrees && read(bits.inference) == Some(false) && read(bits.grad) == Some(before))
}

fn grad_mode_agrees(torch: &Bound<'_, PyModule>, tls: &TorchTls) -> PyResult<bool> {
    let set = torch.getattr("_C")?.getattr("_set_grad_enabled")?;
    let before: bool = torch.call_method0("is_grad_enabled")?.extract()?;
    let mut agrees = true;
    for mode in [true, false] {
        set.call1((mode,))?;
        agrees &= tls.grad_mode() == mode && torch.call_method0("is_grad_enabled")?.extract::<bool>()? == mode;
    }
    set.call1((before,))?;
    Ok(agrees && tls.grad_mode() == before)
}

fn inference_mode_agrees(torch: &Bound<'_, PyModule>, tls: &TorchTls) -> PyResult<bool> {
    let python = || -> PyResult<bool> { torch.call_method0("is_inference_mode_enabled")?.extract() };
    if python()? || tls.inference_mode() {
        return Ok(false); // calibrate from the default state only
    }
    let mode = torch.call_method1("inference_mode", (true,))?;
    mode.call_method0("__enter__")?;
    let inside = tls.inference_mode() && python()?;
    mode.call_method1("__exit__", (py_none(torch.py()), py_none(torch.py()), py_none(torch.py())))?;
    Ok(inside && !tls.inference_mode())
}

fn py_none(py: Python<'_>) -> Bound<'_, PyAny> {
    py.None().into_bound(py)
}

/// The values of the `Autocast*` keys: every key between the lowest and the highest
/// `Autocast*` member torch names that is excluded now (autocast off), provided they are
/// as many as the `Autocast*` keys in this thread's excluded set.
fn autocast_keys(torch: &Bound<'_, PyModule>, tls: &TorchTls) -> PyResult<Option<Vec<u16>>> {
    let c = torch.getattr("_C")?;
    if c.call_method0("_is_any_autocast_enabled")?.extract::<bool>()? {
        return Ok(None);
    }
    let mut named = Vec::new();
    for item in c.getattr("DispatchKey")?.getattr("__members__")?.call_method0("items")?.try_iter()? {
        let (name, key): (String, Bound<'_, PyAny>) = item?.extract()?;
        if name.starts_with("Autocast") {
            named.push(key.call_method0("__int__")?.extract::<u16>()?);
        }
    }
    let (Some(&low), Some(&high)) = (named.iter().min(), named.iter().max()) else { return Ok(None) };
    let excluded: Vec<u16> = (low..=high).filter(|&key| tls.key_excluded(key)).collect();
    let listed = c.call_method0("_dispatch_tls_local_exclude_set")?.str()?.to_string().matches("Autocast").count();
    let complete = named.iter().all(|key| excluded.contains(key)) && excluded.len() == listed;
    Ok(complete.then_some(excluded))
}

/// Switching each named autocast key on is seen by the fast reader; a key torch's reader
/// ignores (on some builds `AutocastMPS`) is dropped, so both say the same for every
/// named key. Keys torch does not name (between named ones) are kept: if torch's reader
/// ignored one of those, a guard would fail where it passes, never the reverse.
fn autocast_agrees(torch: &Bound<'_, PyModule>, fast: &mut FastTorchState) -> PyResult<bool> {
    let c = torch.getattr("_C")?;
    let set_excluded = c.getattr("_dispatch_tls_set_dispatch_key_excluded")?;
    let mut agrees = !fast.autocast_enabled();
    for item in c.getattr("DispatchKey")?.getattr("__members__")?.call_method0("items")?.try_iter()? {
        let (name, key): (String, Bound<'_, PyAny>) = item?.extract()?;
        if !name.starts_with("Autocast") {
            continue;
        }
        let value = key.call_method0("__int__")?.extract::<u16>()?;
        set_excluded.call1((&key, false))?;
        agrees &= fast.autocast_enabled();
        let seen_by_torch = c.call_method0("_is_any_autocast_enabled")?.extract::<bool>()?;
        set_excluded.call1((&key, true))?;
        if !seen_by_torch {
            fast.autocast_keys.retain(|&k| k != value);
        }
    }
    Ok(agrees && !fast.autocast_enabled())
}

/// The bits of the autocast keys in the raw key set words: each key switched on alone
/// flips exactly one bit, and the keys are consecutive, so their bits are the run between
/// the lowest and the highest key's bit (keys torch does not name included), less the
/// bits of keys dropped by `autocast_agrees`. None when any of that does not hold.
fn autocast_bits(torch: &Bound<'_, PyModule>, fast: &FastTorchState) -> PyResult<Option<([u64; 2], [u64; 2])>> {
    let c = torch.getattr("_C")?;
    let set_excluded = c.getattr("_dispatch_tls_set_dispatch_key_excluded")?;
    let Some(off) = fast.tls.raw_key_sets() else { return Ok(None) };
    let mut flipped: Vec<(u16, usize, u32)> = Vec::new(); // key, word, bit
    for item in c.getattr("DispatchKey")?.getattr("__members__")?.call_method0("items")?.try_iter()? {
        let (name, key): (String, Bound<'_, PyAny>) = item?.extract()?;
        if !name.starts_with("Autocast") {
            continue;
        }
        let value = key.call_method0("__int__")?.extract::<u16>()?;
        set_excluded.call1((&key, false))?;
        let on = fast.tls.raw_key_sets();
        set_excluded.call1((&key, true))?;
        let Some(on) = on else { return Ok(None) };
        let diff = [on[0] ^ off[0], on[1] ^ off[1]];
        match (diff[0].count_ones(), diff[1].count_ones()) {
            (1, 0) => flipped.push((value, 0, diff[0].trailing_zeros())),
            (0, 1) => flipped.push((value, 1, diff[1].trailing_zeros())),
            _ => return Ok(None),
        }
    }
    let word = flipped.first().map_or(0, |f| f.1);
    let (Some(low), Some(high)) = (flipped.iter().min_by_key(|f| f.0), flipped.iter().max_by_key(|f| f.0)) else {
        return Ok(None);
    };
    let (low_bit, high_bit) = (low.2, high.2);
    let span = high.0 - low.0;
    let in_order = |f: &(u16, usize, u32)| f.1 == word && f.2.checked_sub(low_bit) == Some(u32::from(f.0 - low.0));
    if !flipped.iter().all(in_order) || high_bit.checked_sub(low_bit) != Some(u32::from(span)) || high_bit >= 64 {
        return Ok(None); // not one bit per key, in key order
    }
    let mut mask = 0u64;
    for key in low.0..=high.0 {
        if fast.autocast_keys.contains(&key) {
            mask |= 1 << (low_bit + u32::from(key - low.0));
        }
    }
    let mut masks = [0u64; 2];
    masks[word] = mask;
    Ok(Some((masks, [off[0] & masks[0], off[1] & masks[1]])))
}
