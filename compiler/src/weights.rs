//! The weights file: the model's constants (batch norms folded) as one binary file the library
//! maps at `create`, each constant at a 64-byte-aligned offset after a 64-byte header:
//! `TUNEHUBW`, the format version, the file's length and the build id (a hash of the
//! constants, also compiled into the library, so a weights file of another build is refused).
//! Little-endian f32, the only byte order the targets have.

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
    for c in &p.constants {
        offsets.push(end);
        end = align(end + 4 * c.data.len() as u64);
    }
    let mut bytes = vec![0u8; end as usize];
    let mut id = 0xcbf2_9ce4_8422_2325u64;
    for (c, &o) in p.constants.iter().zip(&offsets) {
        let mut at = o as usize;
        for x in &c.data {
            bytes[at..at + 4].copy_from_slice(&x.to_le_bytes());
            at += 4;
        }
        id = fnv1a(id, c.key.as_bytes());
        id = fnv1a(id, &bytes[o as usize..at]);
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
        end = align(end + 4 * k.elements.max(1) as u64);
    }
    (offsets, end)
}
