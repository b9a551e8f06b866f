//! Opening a device for attention: [`Gpu::open`] (gpu/context.rs: adapter, features, limits), then
//! what a kernel must learn of the device before a plan is built: the cooperative-matrix element
//! layout that `tiled-coop-vk` reads scores by (its probe, kernels/tiled_coop_vk.rs; for the bf16
//! A operand too where the device has bf16 cooperative matrices). It sits above
//! both, so the device layer never imports a kernel (that was an import loop).

use crate::gpu::context::{AdapterSelection, CoopLayout};
use crate::gpu::{Bf16Matrix, Gpu};
use crate::kernels::tiled_coop_vk;
use crate::Result;

/// Opens the best adapter matching `sel` with the `wanted` features ([`Gpu::open`]) and probes
/// the cooperative-matrix layout (one 32-invocation dispatch) where `tiled-coop-vk` could run;
/// elsewhere the layout says why it was not probed.
pub fn open(sel: &AdapterSelection, wanted: wgpu::Features) -> Result<Gpu> {
    let mut gpu = Gpu::open(sel, wanted)?;
    let layout = match tiled_coop_vk::device_check(&gpu.caps) {
        Ok(()) => tiled_coop_vk::probe(&gpu, tiled_coop_vk::Build::Device),
        Err(why) => CoopLayout::NotProbed(why),
    };
    // The bf16 builds assume the f16 A operand's layout for bf16 too: checked where they can run.
    if layout == CoopLayout::Assumed && gpu.caps.bf16_matrix == Bf16Matrix::On {
        match tiled_coop_vk::probe_bf16(&gpu) {
            CoopLayout::Assumed => {}
            other => gpu.set_bf16_matrix(Bf16Matrix::Off(format!(
                "the bf16 A operand's element layout is not the one the kernels assume: {other:?}"
            ))),
        }
    }
    gpu.set_coop_layout(layout);
    Ok(gpu)
}
