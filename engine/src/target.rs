//! PLACEHOLDER until the measure branch lands.
pub struct Target {
    pub cores: usize,
}
impl Target {
    pub fn vector_lanes_f32(&self) -> u32 {
        16
    }
}
