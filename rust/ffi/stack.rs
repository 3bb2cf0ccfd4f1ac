//! How much C stack the current thread has left: the check behind the `RecursionError` the
//! hook provokes before a deep recursion under it overflows the stack (`c_recursion`).

use std::cell::Cell;

extern "C" {
    fn fd_current_thread_stack(low: *mut usize, size: *mut usize) -> i32;
}

thread_local! {
    /// The lowest stack address this thread may reach before the check reports a short
    /// stack: its stack's lowest address plus [`margin`]. 0 until first read; 1 when the
    /// bounds could not be read (never short).
    static FLOOR: Cell<usize> = const { Cell::new(0) };
}

/// Whether the calling thread is within [`margin`] of the end of its stack.
#[inline(never)]
pub fn is_short() -> bool {
    let marker = 0_u8;
    let here = std::ptr::from_ref(std::hint::black_box(&marker)) as usize;
    let floor = FLOOR.with(|floor| {
        if floor.get() == 0 {
            floor.set(read_floor());
        }
        floor.get()
    });
    here < floor
}

fn read_floor() -> usize {
    let (mut low, mut size) = (0_usize, 0_usize);
    // SAFETY: the shim writes the two out-parameters, which point to live locals.
    let failed = unsafe { fd_current_thread_stack(&raw mut low, &raw mut size) } != 0;
    if failed || size == 0 {
        return 1;
    }
    low.saturating_add(margin(size))
}

/// What stays free for the frame that gets the `RecursionError` and the C code frames call
/// (torch ops, the capture of a frame): an eighth of the stack, between 64 KB and 1 MB
/// (1 MB of the usual 8 MB).
fn margin(size: usize) -> usize {
    (size / 8).clamp(64 << 10, 1 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_main_stack_is_not_short_and_its_floor_is_below_us() {
        assert!(!is_short());
        let floor = FLOOR.with(Cell::get);
        assert!(floor > 1, "the thread's stack bounds were read");
        let marker = 0_u8;
        assert!(floor < std::ptr::from_ref(&marker) as usize);
    }

    #[test]
    fn the_margin_is_an_eighth_within_bounds() {
        assert_eq!(margin(8 << 20), 1 << 20);
        assert_eq!(margin(16 << 20), 1 << 20);
        assert_eq!(margin(1 << 20), 128 << 10);
        assert_eq!(margin(256 << 10), 64 << 10);
    }

    #[test]
    fn a_thread_with_a_small_stack_reads_its_own_bounds() {
        let spawned = std::thread::Builder::new().stack_size(256 << 10).spawn(|| {
            let short = is_short();
            (short, FLOOR.with(Cell::get))
        });
        let (short, floor) = spawned.expect("spawn").join().expect("join");
        assert!(!short && floor > 1);
    }
}
