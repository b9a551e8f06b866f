//! Opening a Vulkan device with bf16 cooperative matrices (VK_KHR_shader_bfloat16), which wgpu 30
//! neither requests nor names: `tiled-coop-vk`'s bf16 builds (shaders/tiled_coop_vk.comp with
//! BF16 = 1) need the extension and its features `shaderBFloat16Type` and
//! `shaderBFloat16CooperativeMatrix` enabled on the device. Where the driver offers both (the H100
//! and H200 drivers do, issue 38), [`Gpu::open`](super::Gpu::open) opens the device through
//! wgpu-hal with them added (src/gpu/open.rs), and falls back to wgpu's own opening otherwise;
//! the caps record which ([`Bf16Matrix`]).

use std::ffi::{c_void, CStr};

use ash::vk;
use serde::Serialize;

/// Whether the device has bf16 cooperative matrices enabled, and if not, why.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "status", content = "detail")]
pub enum Bf16Matrix {
    /// Opened with VK_KHR_shader_bfloat16, `shaderBFloat16Type` and
    /// `shaderBFloat16CooperativeMatrix`.
    On,
    /// Not enabled: why.
    Off(String),
}

/// The extension's name.
pub const EXTENSION: &CStr = c"VK_KHR_shader_bfloat16";

/// VkPhysicalDeviceShaderBfloat16FeaturesKHR (ash 0.38 predates it): sType
/// VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR = 1000141000 (extension 142).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(super) struct Features {
    s_type: vk::StructureType,
    p_next: *mut c_void,
    shader_b_float16_type: vk::Bool32,
    shader_b_float16_dot_product: vk::Bool32,
    shader_b_float16_cooperative_matrix: vk::Bool32,
}

impl Default for Features {
    fn default() -> Self {
        Features {
            s_type: vk::StructureType::from_raw(1_000_141_000),
            p_next: std::ptr::null_mut(),
            shader_b_float16_type: vk::FALSE,
            shader_b_float16_dot_product: vk::FALSE,
            shader_b_float16_cooperative_matrix: vk::FALSE,
        }
    }
}

// SAFETY: the struct is laid out as the Vulkan structure (sType, pNext first) and extends both
// chains, as the extension's registry entry says.
unsafe impl vk::ExtendsPhysicalDeviceFeatures2 for Features {}
unsafe impl vk::ExtendsDeviceCreateInfo for Features {}

impl Features {
    /// The two features the bf16 builds use, on.
    pub(super) fn wanted() -> Self {
        Features {
            shader_b_float16_type: vk::TRUE,
            shader_b_float16_cooperative_matrix: vk::TRUE,
            ..Features::default()
        }
    }
}

/// Why the adapter cannot have bf16 cooperative matrices, if it cannot: not Vulkan, the extension
/// not offered, or one of the two features off.
pub fn offered(adapter: &wgpu::Adapter) -> Result<(), String> {
    let f: Features = super::vk_features::query(adapter, EXTENSION)?;
    if f.shader_b_float16_type == vk::FALSE || f.shader_b_float16_cooperative_matrix == vk::FALSE {
        return Err(format!(
            "VK_KHR_shader_bfloat16 is offered without {}",
            if f.shader_b_float16_type == vk::FALSE {
                "shaderBFloat16Type"
            } else {
                "shaderBFloat16CooperativeMatrix"
            }
        ));
    }
    Ok(())
}
