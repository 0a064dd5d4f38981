//! The layout a model's f32 convolutions and pools run in (issue 60's layouts per graph).
//! ONNX gives NCHW; in NHWC a vector spans channels, so a depthwise convolution on a 7x7 map
//! fills its vectors, and a 1x1 convolution is a plain matrix product over the map's pixels.
//!
//! A convolution extracted in NHWC reads its data transposed and its weight as HWIO (a batch
//! norm after it applied in its epilogue, not folded into the weight), and writes NHWC; a
//! pool reads and writes NHWC, the global pool reads NHWC. The build keeps each result so for
//! the next of them and the elementwise steps between, and copies back to NCHW once, before
//! the first reader that needs it (`tunehub-compiler`'s `layout`). Grouped convolutions other
//! than depthwise stay NCHW. Quantized convolutions always run in NHWC (the dot-product
//! instructions sum adjacent channels), whatever this says.

use std::fmt;
use std::str::FromStr;

/// The layout of the f32 convolutions' tasks; by default the model's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// The model's own: NCHW.
    #[default]
    Nchw,
    /// Channels last: NHWC data and results, HWIO weights.
    Nhwc,
    /// NHWC, with 3x3 stride-1 convolutions by Winograd's minimal filtering (`winograd`):
    /// three tasks each, a transform of the input, a batched product, a transform of the
    /// output. A form of the convolutions more than a layout, chosen as layouts are.
    Winograd,
}

impl Layout {
    /// Every layout, the model's first.
    pub const ALL: [Layout; 3] = [Layout::Nchw, Layout::Nhwc, Layout::Winograd];

    /// What a model's job tunes when the user leaves the choice to tunehub (`auto`): NHWC,
    /// whose tuned kernels took 28% (MobileNetV2) and 6% (ResNet-18) less than NCHW's here
    /// (docs/decisions.md), and the Winograd form of the convolutions that have one, for a
    /// build to choose per convolution (`choice`). The first is the program their union runs.
    /// A build still takes the tuned layout that takes least.
    pub const AUTO: [Layout; 2] = [Layout::Nhwc, Layout::Winograd];

    pub fn name(self) -> &'static str {
        match self {
            Layout::Nchw => "nchw",
            Layout::Nhwc => "nhwc",
            Layout::Winograd => "winograd",
        }
    }

    /// Whether window operators read and write NHWC.
    pub fn nhwc(self) -> bool {
        self != Layout::Nchw
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Layout {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Layout::ALL
            .into_iter()
            .find(|l| l.name() == s)
            .ok_or_else(|| format!("unknown layout '{s}': nchw, nhwc or winograd"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layout_reads_back_from_its_name() {
        for l in Layout::ALL {
            assert_eq!(l.name().parse::<Layout>(), Ok(l));
        }
        let e = "nchw16c".parse::<Layout>().unwrap_err();
        assert!(e.contains("nchw, nhwc or winograd"), "{e}");
    }
}
