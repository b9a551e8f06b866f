//! Opening a Vulkan device through wgpu-hal with extensions wgpu 30 does not request: bf16
//! cooperative matrices (VK_KHR_shader_bfloat16, src/gpu/bf16.rs) and VK_NV_cooperative_matrix2
//! (src/gpu/cm2.rs), each with the features the kernels use, each only where the driver offers
//! it (the caller has checked their `offered`).

use ash::vk;

/// Opens `adapter` as `desc` asks, with VK_KHR_shader_bfloat16 (`bf16`) and
/// VK_NV_cooperative_matrix2 (`cm2`) and their features added.
pub fn request(
    adapter: &wgpu::Adapter,
    desc: &wgpu::DeviceDescriptor<'_>,
    bf16: bool,
    cm2: bool,
) -> Result<(wgpu::Device, wgpu::Queue), String> {
    let names: Vec<&str> = [
        (bf16, "VK_KHR_shader_bfloat16"),
        (cm2, "VK_NV_cooperative_matrix2"),
    ]
    .into_iter()
    .filter(|(on, _)| *on)
    .map(|(_, n)| n)
    .collect();
    let names = names.join(" and ");
    let open = {
        // SAFETY: the hal adapter is used while `adapter` is alive, and released before wgpu
        // takes the opened device.
        let Some(hal) = (unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }) else {
            return Err("not a Vulkan adapter".into());
        };
        let mut bf16_features = super::bf16::Features::wanted();
        let mut cm2_features = super::cm2::Features::wanted();
        let (bf16_chained, cm2_chained) = (&mut bf16_features, &mut cm2_features);
        let add: Box<wgpu::hal::vulkan::CreateDeviceCallback<'_>> = Box::new(move |args| {
            let mut info: vk::DeviceCreateInfo<'_> = std::mem::take(args.create_info);
            if bf16 {
                args.extensions.push(super::bf16::EXTENSION);
                info = info.push_next(bf16_chained);
            }
            if cm2 {
                args.extensions.push(super::cm2::EXTENSION);
                info = info.push_next(cm2_chained);
            }
            *args.create_info = info;
        });
        // SAFETY: the features wgpu validated for this adapter, its own limits and hints; the
        // callback only adds offered extensions and enables offered features of theirs.
        unsafe {
            hal.open_with_callback(
                desc.required_features,
                &desc.required_limits,
                &desc.memory_hints,
                Some(add),
            )
        }
        .map_err(|e| format!("opening the device with {names}: {e}"))?
    };
    // SAFETY: `open` was created from this adapter's hal adapter with `desc`'s features.
    unsafe { adapter.create_device_from_hal(open, desc) }
        .map_err(|e| format!("wgpu refused the device opened with {names}: {e}"))
}
