// mask_none.wgsl — mask prelude without a bias buffer: only the causal index test applies.
const HAS_MASK: bool = false;
fn mask_bias(gh: u32, i: u32, j: u32) -> f32 { return 0.0; }
