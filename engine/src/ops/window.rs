//! The sliding window of convolutions and pools: its parameters, its output extent, and the
//! padding stage in front of it.

use super::builder::{DagBuilder, c, ld};
use crate::ir::{Cond, DagError, Expr};

/// Parameters of a 2-D convolution or pooling window.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub kh: i64,
    pub kw: i64,
    pub stride: i64,
    pub pad: i64,
    pub dilation: i64,
}

impl Window {
    /// A `k x k` window, undilated.
    pub fn square(k: i64, stride: i64, pad: i64) -> Window {
        Window {
            kh: k,
            kw: k,
            stride,
            pad,
            dilation: 1,
        }
    }

    /// Output height and width for an `h x w` input; an empty output is an error.
    pub(super) fn output(&self, h: i64, w: i64) -> Result<(i64, i64), DagError> {
        let (oh, ow) = (
            out_extent(h, self.kh, self.stride, self.pad, self.dilation),
            out_extent(w, self.kw, self.stride, self.pad, self.dilation),
        );
        check_window(oh, ow)?;
        Ok((oh, ow))
    }
}

/// Output extent of a sliding window.
fn out_extent(inp: i64, k: i64, stride: i64, pad: i64, dil: i64) -> i64 {
    (inp + 2 * pad - dil * (k - 1) - 1) / stride + 1
}

/// `src` itself without padding, else a padding stage over it.
pub(super) fn padded(
    b: &mut DagBuilder,
    src: usize,
    hd: usize,
    wd: usize,
    pad: i64,
    fill: f64,
) -> usize {
    if pad > 0 {
        pad_stage(b, src, "pad", hd, wd, pad, fill)
    } else {
        src
    }
}

/// `pad[...] = select(in range, src[... - pad], fill)` on the two spatial dims `hd`, `wd`.
fn pad_stage(
    b: &mut DagBuilder,
    src: usize,
    name: &str,
    hd: usize,
    wd: usize,
    pad: i64,
    fill: f64,
) -> usize {
    let mut shape = b.shape(src).to_vec();
    let (h, w) = (shape[hd], shape[wd]);
    shape[hd] += 2 * pad;
    shape[wd] += 2 * pad;
    b.compute(name, &shape, |ax| {
        let mut idx = ax.to_vec();
        idx[hd] = ax[hd].add(&c(-pad));
        idx[wd] = ax[wd].add(&c(-pad));
        let cond = Cond::And(
            Box::new(Cond::in_range(idx[hd].clone(), 0, h)),
            Box::new(Cond::in_range(idx[wd].clone(), 0, w)),
        );
        Expr::select(cond, ld(src, &idx), Expr::Const(fill))
    })
}

fn check_window(oh: i64, ow: i64) -> Result<(), DagError> {
    if oh <= 0 || ow <= 0 {
        return Err(DagError::Invalid {
            stage: "window".into(),
            msg: format!("the window leaves an empty output ({oh}x{ow})"),
        });
    }
    Ok(())
}
