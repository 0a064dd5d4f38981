//! The weights file: the model's constants (batch norms folded) as one binary file the library
//! maps at `create`, each constant at a 64-byte-aligned offset after a 64-byte header:
//! `TUNEHUBW`, the format version, the file's length and the build id (a hash of the
//! constants, also compiled into the library, so a weights file of another build is refused).
//! Little-endian, the only byte order the targets have; each constant in its type (f32, or a
//! QDQ model's i8 weights, i32 biases, 8-bit zero points).

use crate::memory::align;
use crate::program::Program;

pub const MAGIC: &[u8; 8] = b"TUNEHUBW";
pub const VERSION: u64 = 1;
pub const HEADER: u64 = 64;

pub struct Weights {
    pub bytes: Vec<u8>,
    /// Per constant, its byte offset in the file.
    pub offsets: Vec<u64>,
    pub build_id: u64,
}

/// FNV-1a, 64 bits: a build's fingerprint, not a security boundary.
fn fnv1a(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

pub fn layout(p: &Program) -> Weights {
    let mut offsets = vec![];
    let mut end = HEADER;
    let data: Vec<Vec<u8>> = p.constants.iter().map(|c| c.data.le_bytes()).collect();
    for d in &data {
        offsets.push(end);
        end = align(end + d.len() as u64);
    }
    let mut bytes = vec![0u8; end as usize];
    let mut id = 0xcbf2_9ce4_8422_2325u64;
    for ((c, d), &o) in p.constants.iter().zip(&data).zip(&offsets) {
        let at = o as usize;
        bytes[at..at + d.len()].copy_from_slice(d);
        id = fnv1a(id, c.key.as_bytes());
        id = fnv1a(id, d);
    }
    bytes[..8].copy_from_slice(MAGIC);
    bytes[8..16].copy_from_slice(&VERSION.to_le_bytes());
    bytes[16..24].copy_from_slice(&end.to_le_bytes());
    bytes[24..32].copy_from_slice(&id.to_le_bytes());
    Weights {
        bytes,
        offsets,
        build_id: id,
    }
}

/// Per packed weight, its byte offset in the buffer `create` packs them into; and its size.
pub fn packed_layout(p: &Program) -> (Vec<u64>, u64) {
    let mut offsets = vec![];
    let mut end = 0;
    for k in &p.packed {
        offsets.push(end);
        end = align(end + k.dtype.bytes() as u64 * k.elements.max(1) as u64);
    }
    (offsets, end)
}
