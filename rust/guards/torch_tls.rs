//! Fast readers of torch's thread-local modes for the state guards, accepted only after
//! they agree with torch's own Python readers (`torch.is_grad_enabled()`,
//! `torch.is_inference_mode_enabled()`, `torch._C._is_any_autocast_enabled()`) with each
//! mode switched on and off. Calibrated once per process, on the first guard set with
//! state checks; None (the Python readers are used) when anything does not match.

use crate::ffi::torch_tls::TorchTls;
use pyo3::prelude::*;
use std::sync::OnceLock;

pub struct FastTorchState {
    tls: TorchTls,
    /// The `Autocast*` dispatch keys: autocast is on when one is not excluded.
    autocast_keys: Vec<u16>,
    /// Their bits in the raw thread-local key set words, and what those bits hold when
    /// every one is excluded; None: test the keys one by one.
    autocast_bits: Option<([u64; 2], [u64; 2])>,
}

impl FastTorchState {
    pub fn grad_enabled(&self) -> bool {
        self.tls.grad_mode()
    }

    pub fn inference_mode(&self) -> bool {
        self.tls.inference_mode()
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
    let mut fast = FastTorchState { tls, autocast_keys, autocast_bits: None };
    if !autocast_agrees(&torch, &mut fast)? {
        return Ok(None);
    }
    fast.autocast_bits = autocast_bits(&torch, &fast)?;
    Ok(Some(fast))
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
