//! Reading a Vulkan extension's feature structure from the adapter, for the extensions wgpu 30
//! neither requests nor names (src/gpu/bf16.rs, src/gpu/cm2.rs): each says from it whether the
//! device can be opened with what its kernels use (src/gpu/open.rs).

use std::ffi::CStr;

use ash::vk;

/// The adapter's `F` (an extension's feature structure, all off by `Default`), as the driver
/// fills it, or why there is none: not a Vulkan adapter, or `extension` not offered.
pub(super) fn query<F>(adapter: &wgpu::Adapter, extension: &CStr) -> Result<F, String>
where
    F: vk::ExtendsPhysicalDeviceFeatures2 + Default,
{
    // SAFETY: the hal adapter is only read while `adapter` is alive.
    let Some(hal) = (unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }) else {
        return Err("not a Vulkan adapter".into());
    };
    if !hal
        .physical_device_capabilities()
        .supports_extension(extension)
    {
        return Err(format!(
            "the driver does not offer {}",
            extension.to_string_lossy()
        ));
    }
    let mut f = F::default();
    let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut f);
    // SAFETY: a valid physical device of this instance; the chain is the one structure above.
    unsafe {
        hal.shared_instance()
            .raw_instance()
            .get_physical_device_features2(hal.raw_physical_device(), &mut f2)
    };
    Ok(f)
}
