//! A window operator's attributes (ONNX's `Conv`, `MaxPool`, `AveragePool`) as the
//! library's window parameters, when they are the library's.

use crate::graph::Node;

/// `kh`, `kw`, `stride`, `pad`, `dilation` when the window is the library's: symmetric pads,
/// one stride and one dilation for both dimensions.
pub fn window(n: &Node, kh: i64, kw: i64) -> Option<[(&'static str, i64); 5]> {
    let one = |v: Option<Vec<i64>>, default: i64| -> Option<i64> {
        match v {
            None => Some(default),
            Some(v) if !v.is_empty() && v.iter().all(|&x| x == v[0]) => Some(v[0]),
            Some(_) => None,
        }
    };
    let stride = one(n.ints("strides"), 1)?;
    let pad = one(n.ints("pads"), 0)?;
    let dilation = one(n.ints("dilations"), 1)?;
    Some([
        ("kh", kh),
        ("kw", kw),
        ("stride", stride),
        ("pad", pad),
        ("dilation", dilation),
    ])
}
