//! Opening a Vulkan device with VK_NV_cooperative_matrix2, which wgpu 30 neither requests nor
//! names: `tiled-coop-cm2`'s kernel (shaders/tiled_cm2.comp) uses workgroup-scope matrices,
//! tensor-addressed loads and stores, row reductions, per-element functions and conversions
//! between matrix uses, each a feature of that extension. Where the driver offers the extension
//! and those six features (the H100 and H200 drivers do, issue 38), [`Gpu::open`](super::Gpu::open)
//! opens the device through wgpu-hal with them added (src/gpu/open.rs), and the caps record
//! whether it did ([`Cm2`]).

use std::ffi::{c_void, CStr};

use ash::vk;
use serde::Serialize;

/// Whether the device has VK_NV_cooperative_matrix2 enabled, and if not, why.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "status", content = "detail")]
pub enum Cm2 {
    /// Opened with VK_NV_cooperative_matrix2 and the six features the kernel uses.
    On,
    /// Not enabled: why.
    Off(String),
}

/// The extension's name.
pub const EXTENSION: &CStr = c"VK_NV_cooperative_matrix2";

/// VkPhysicalDeviceCooperativeMatrix2FeaturesNV (ash 0.38 predates it): sType
/// VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV = 1000593000 (extension 594).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(super) struct Features {
    s_type: vk::StructureType,
    p_next: *mut c_void,
    workgroup_scope: vk::Bool32,
    flexible_dimensions: vk::Bool32,
    reductions: vk::Bool32,
    conversions: vk::Bool32,
    per_element_operations: vk::Bool32,
    tensor_addressing: vk::Bool32,
    block_loads: vk::Bool32,
}

impl Default for Features {
    fn default() -> Self {
        Features {
            s_type: vk::StructureType::from_raw(1_000_593_000),
            p_next: std::ptr::null_mut(),
            workgroup_scope: vk::FALSE,
            flexible_dimensions: vk::FALSE,
            reductions: vk::FALSE,
            conversions: vk::FALSE,
            per_element_operations: vk::FALSE,
            tensor_addressing: vk::FALSE,
            block_loads: vk::FALSE,
        }
    }
}

impl Features {
    /// The features the kernel uses, each on (block loads are not used).
    pub(super) fn wanted() -> Self {
        Features {
            workgroup_scope: vk::TRUE,
            flexible_dimensions: vk::TRUE,
            reductions: vk::TRUE,
            conversions: vk::TRUE,
            per_element_operations: vk::TRUE,
            tensor_addressing: vk::TRUE,
            ..Features::default()
        }
    }

    /// The first wanted feature this one lacks, by its Vulkan name.
    fn missing(&self) -> Option<&'static str> {
        [
            (self.workgroup_scope, "cooperativeMatrixWorkgroupScope"),
            (
                self.flexible_dimensions,
                "cooperativeMatrixFlexibleDimensions",
            ),
            (self.reductions, "cooperativeMatrixReductions"),
            (self.conversions, "cooperativeMatrixConversions"),
            (
                self.per_element_operations,
                "cooperativeMatrixPerElementOperations",
            ),
            (self.tensor_addressing, "cooperativeMatrixTensorAddressing"),
        ]
        .into_iter()
        .find(|(on, _)| *on == vk::FALSE)
        .map(|(_, name)| name)
    }
}

// SAFETY: the struct is laid out as the Vulkan structure (sType, pNext first) and extends both
// chains, as the extension's registry entry says.
unsafe impl vk::ExtendsPhysicalDeviceFeatures2 for Features {}
unsafe impl vk::ExtendsDeviceCreateInfo for Features {}

/// Why the adapter cannot have VK_NV_cooperative_matrix2 as the kernel uses it, if it cannot:
/// not Vulkan, the extension not offered, or one of the six features off.
pub fn offered(adapter: &wgpu::Adapter) -> Result<(), String> {
    let f: Features = super::vk_features::query(adapter, EXTENSION)?;
    match f.missing() {
        Some(name) => Err(format!(
            "VK_NV_cooperative_matrix2 is offered without {name}"
        )),
        None => Ok(()),
    }
}
