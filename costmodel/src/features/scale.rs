//! Log scaling: count-like features become `log2(1 + x)`, as Ansor's are.

use super::layout::*;

/// Whether feature `i` is count-like, so that [`extract`] applies `log2(1 + x)` to it as
/// Ansor does (one-hots, flags and the intensity curve stay raw).
pub const fn is_log_scaled(i: usize) -> bool {
    if i < LOOPS {
        true
    } else if i < BUFFERS {
        (i - LOOPS) % PER_LOOP_KIND < 3
    } else if i < INTENSITY {
        let o = (i - BUFFERS) % PER_BUFFER;
        !matches!(
            o,
            B_READ | B_WRITE | B_RW | B_REUSE_LOOP | B_REUSE_SERIAL | B_REUSE_NONE
        )
    } else if i < ALLOC {
        false
    } else {
        i < STORE || i >= REGTILE
    }
}

/// [`is_log_scaled`] of every slot, computed once.
const LOG_SCALED: [bool; N_FEATURES] = {
    let mut m = [false; N_FEATURES];
    let mut i = 0;
    while i < N_FEATURES {
        m[i] = is_log_scaled(i);
        i += 1;
    }
    m
};

pub(super) fn log_scale(values: &mut [f32; N_FEATURES]) {
    // Most values are 0 (one-hots, empty buffer slots), which the scaling leaves at 0.
    for (v, scaled) in values.iter_mut().zip(LOG_SCALED) {
        if scaled && *v != 0.0 {
            *v = (1.0 + *v).log2();
        }
    }
}
