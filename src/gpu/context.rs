//! Instance, adapter and device: backend choice, adapter ranking, features and limits, and the
//! plumbing that turns wgpu validation errors and device loss into messages instead of panics.

use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::{Error, Result};

/// Which adapter to use. Empty fields mean "any"; `WGPU_BACKEND` and `WGPU_ADAPTER_NAME` fill them
/// when the command line does not.
#[derive(Debug, Clone, Default)]
pub struct AdapterSelection {
    /// `vulkan`, `metal`, `dx12`, `gl` or `all` (comma lists allowed, as for WGPU_BACKEND).
    pub backend: Option<String>,
    /// Case-insensitive substring of the adapter name.
    pub name: Option<String>,
}

/// Parses a backend list; unknown names are an error that names them.
pub fn parse_backends(s: &str) -> Result<wgpu::Backends> {
    let mut b = wgpu::Backends::empty();
    for part in s.split(',').map(|p| p.trim().to_ascii_lowercase()) {
        b |= match part.as_str() {
            "vulkan" | "vk" => wgpu::Backends::VULKAN,
            "metal" | "mtl" => wgpu::Backends::METAL,
            "dx12" | "d3d12" => wgpu::Backends::DX12,
            "gl" | "gles" | "opengl" => wgpu::Backends::GL,
            "all" => wgpu::Backends::all(),
            other => {
                return Err(Error::NoAdapter(format!(
                    "unknown backend `{other}` (expected vulkan, metal, dx12, gl or all)"
                )))
            }
        };
    }
    Ok(b)
}

impl AdapterSelection {
    fn backends(&self) -> Result<wgpu::Backends> {
        match &self.backend {
            Some(b) => parse_backends(b),
            None => match std::env::var("WGPU_BACKEND") {
                Ok(s) if !s.trim().is_empty() => parse_backends(&s),
                _ => Ok(wgpu::Backends::all()),
            },
        }
    }
    fn name_filter(&self) -> Option<String> {
        self.name
            .clone()
            .or_else(|| std::env::var("WGPU_ADAPTER_NAME").ok())
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.to_lowercase())
    }
}

/// The element layout of 16 x 16 cooperative matrices on a device, as shaders/coop_layout_probe.comp
/// finds it (kernels/tiled_coop_vk.rs): the `tiled-coop-vk` kernel reads scores by their
/// coordinates and runs only where they are the ones it assumes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "status", content = "detail")]
pub enum CoopLayout {
    /// Not probed, and why (no cooperative matrices, not Vulkan, no passthrough shaders, ...).
    NotProbed(String),
    /// The layout the kernels assume (shaders/coop_layout.glsl) for the f32 accumulator and the
    /// f16 A operand.
    Assumed,
    /// Another layout (or a probe that failed): what the probe saw.
    Other(String),
}

/// What a plan builder may know about the adapter: pure data, so plans can be built and tested
/// without a GPU.
#[derive(Debug, Clone, Serialize)]
pub struct AdapterCaps {
    pub backend: String,
    pub timestamps: bool,
    pub f16: bool,
    pub subgroups: bool,
    /// `subgroupBarrier()` (Features::SUBGROUP_BARRIER).
    pub subgroup_barrier: bool,
    pub subgroup_min_size: u32,
    pub subgroup_max_size: u32,
    pub cooperative_matrix: bool,
    /// f32 atomics in storage buffers (Features::SHADER_FLOAT32_ATOMIC: Vulkan with
    /// VK_EXT_shader_atomic_float, Metal): `tiled`'s `--bwd-dq atomic`.
    pub float32_atomics: bool,
    /// Features::PASSTHROUGH_SHADERS on the device (SPIR-V handed to the driver as it is).
    pub passthrough: bool,
    /// The cooperative-matrix element layout ([`CoopLayout`]), probed when the device opens.
    pub coop_layout: CoopLayout,
    /// bf16 cooperative matrices (VK_KHR_shader_bfloat16) enabled on the device, or why not
    /// (src/gpu/bf16.rs).
    pub bf16_matrix: super::bf16::Bf16Matrix,
    /// VK_NV_cooperative_matrix2 enabled on the device, or why not (src/gpu/cm2.rs).
    pub cm2: super::cm2::Cm2,
    pub max_workgroup_storage: u32,
    pub max_invocations_per_workgroup: u32,
    pub max_workgroup_size_x: u32,
    pub max_workgroups_per_dimension: u32,
    pub max_storage_binding: u64,
    pub max_buffer: u64,
    /// The most loop iterations one invocation may run, counted over all its loops, where the
    /// driver stops loops early without an error: Mesa's llvmpipe (lavapipe on Vulkan, llvmpipe
    /// on GL) leaves every loop after 65535 (gallivm's loop limiter, docs/backends.md). `None`
    /// elsewhere. Plans whose dispatches would cross it are refused ([`crate::plan::Dispatch::loop_iters`]).
    pub max_loop_iterations: Option<u64>,
}

impl AdapterCaps {
    /// The shader features of `variants::SHADER_FEATURES` this adapter offers.
    pub fn shader_features(&self) -> wgpu::Features {
        let mut f = wgpu::Features::empty();
        f.set(wgpu::Features::SHADER_F16, self.f16);
        f.set(wgpu::Features::SUBGROUP, self.subgroups);
        f.set(wgpu::Features::SUBGROUP_BARRIER, self.subgroup_barrier);
        f.set(
            wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX,
            self.cooperative_matrix,
        );
        f.set(wgpu::Features::SHADER_FLOAT32_ATOMIC, self.float32_atomics);
        f
    }

    /// These caps with the shader features of `f` (tests build plans "as backend B would offer").
    pub fn with_shader_features(mut self, f: wgpu::Features) -> Self {
        self.f16 = f.contains(wgpu::Features::SHADER_F16);
        self.subgroups = f.contains(wgpu::Features::SUBGROUP);
        self.subgroup_barrier = f.contains(wgpu::Features::SUBGROUP_BARRIER);
        self.cooperative_matrix = f.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX);
        self.float32_atomics = f.contains(wgpu::Features::SHADER_FLOAT32_ATOMIC);
        if self.subgroups && self.subgroup_min_size == 0 {
            // Any size wgpu allows; plan builders that care read min/max.
            self.subgroup_min_size = 4;
            self.subgroup_max_size = 128;
        }
        self
    }

    pub fn from_adapter(a: &wgpu::Adapter) -> Self {
        let f = a.features();
        let l = a.limits();
        let info = a.get_info();
        AdapterCaps {
            backend: backend_name(info.backend).into(),
            timestamps: f.contains(wgpu::Features::TIMESTAMP_QUERY),
            f16: f.contains(wgpu::Features::SHADER_F16),
            subgroups: f.contains(wgpu::Features::SUBGROUP),
            subgroup_barrier: f.contains(wgpu::Features::SUBGROUP_BARRIER),
            subgroup_min_size: info.subgroup_min_size,
            subgroup_max_size: info.subgroup_max_size,
            cooperative_matrix: f.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX),
            float32_atomics: f.contains(wgpu::Features::SHADER_FLOAT32_ATOMIC),
            passthrough: f.contains(wgpu::Features::PASSTHROUGH_SHADERS),
            coop_layout: CoopLayout::NotProbed(
                "not probed: the device was opened without attn_wgpu::device::open".into(),
            ),
            bf16_matrix: super::bf16::Bf16Matrix::Off("no device opened".into()),
            cm2: super::cm2::Cm2::Off("no device opened".into()),
            max_workgroup_storage: l.max_compute_workgroup_storage_size,
            max_invocations_per_workgroup: l.max_compute_invocations_per_workgroup,
            max_workgroup_size_x: l.max_compute_workgroup_size_x,
            max_workgroups_per_dimension: l.max_compute_workgroups_per_dimension,
            max_storage_binding: l.max_storage_buffer_binding_size,
            max_buffer: l.max_buffer_size,
            max_loop_iterations: loop_limit(&info),
        }
    }

    /// WebGPU's default limits: what a plan may assume on any adapter (used by plan tests).
    pub fn webgpu_defaults() -> Self {
        let l = wgpu::Limits::default();
        AdapterCaps {
            backend: "any".into(),
            timestamps: true,
            f16: false,
            subgroups: false,
            subgroup_barrier: false,
            subgroup_min_size: 0,
            subgroup_max_size: 0,
            cooperative_matrix: false,
            float32_atomics: false,
            passthrough: false,
            coop_layout: CoopLayout::NotProbed("no device".into()),
            bf16_matrix: super::bf16::Bf16Matrix::Off("no device".into()),
            cm2: super::cm2::Cm2::Off("no device".into()),
            max_workgroup_storage: l.max_compute_workgroup_storage_size,
            max_invocations_per_workgroup: l.max_compute_invocations_per_workgroup,
            max_workgroup_size_x: l.max_compute_workgroup_size_x,
            max_workgroups_per_dimension: l.max_compute_workgroups_per_dimension,
            max_storage_binding: l.max_storage_buffer_binding_size,
            max_buffer: l.max_buffer_size,
            max_loop_iterations: None,
        }
    }
}

/// Mesa's gallivm (llvmpipe, and lavapipe built on it) caps every invocation at 65535 loop
/// iterations (`LP_MAX_TGSI_LOOP_ITERATIONS`) and then leaves its loops silently: the adapter's
/// name says `llvmpipe` on both of its backends.
pub const LLVMPIPE_LOOP_LIMIT: u64 = 65535;

fn loop_limit(info: &wgpu::AdapterInfo) -> Option<u64> {
    let name = info.name.to_ascii_lowercase();
    (name.contains("llvmpipe") || info.driver.to_ascii_lowercase().contains("llvmpipe"))
        .then_some(LLVMPIPE_LOOP_LIMIT)
}

pub fn backend_name(b: wgpu::Backend) -> &'static str {
    match b {
        wgpu::Backend::Vulkan => "vulkan",
        wgpu::Backend::Metal => "metal",
        wgpu::Backend::Dx12 => "dx12",
        wgpu::Backend::Gl => "gl",
        wgpu::Backend::BrowserWebGpu => "webgpu",
        wgpu::Backend::Noop => "noop",
    }
}

pub fn device_type_name(t: wgpu::DeviceType) -> &'static str {
    match t {
        wgpu::DeviceType::DiscreteGpu => "DiscreteGpu",
        wgpu::DeviceType::IntegratedGpu => "IntegratedGpu",
        wgpu::DeviceType::VirtualGpu => "VirtualGpu",
        wgpu::DeviceType::Cpu => "Cpu",
        wgpu::DeviceType::Other => "Other",
    }
}

/// Ranking: discrete > integrated > virtual > CPU > other; then Vulkan/Metal/DX12 over GL.
fn rank(info: &wgpu::AdapterInfo) -> (u8, u8) {
    let t = match info.device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    };
    let b = match info.backend {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 0,
        _ => 1,
    };
    (t, b)
}

/// Adapter identity as written to result files.
#[derive(Debug, Clone, Serialize)]
pub struct AdapterReport {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    pub driver_info: String,
    pub vendor: u32,
    pub device: u32,
    pub caps: AdapterCaps,
    /// The Vulkan device extensions for matrix units that the driver offers
    /// ([`MATRIX_EXTENSIONS`]), whether or not anything here uses them (wgpu 30 enables
    /// VK_KHR_cooperative_matrix for EXPERIMENTAL_COOPERATIVE_MATRIX, and none of the others).
    /// Empty on other backends.
    pub matrix_extensions: Vec<String>,
}

/// The Vulkan extensions `adapters` and the result files report (issue 38: what the driver offers
/// beside what the kernels use).
pub const MATRIX_EXTENSIONS: [&std::ffi::CStr; 4] = [
    c"VK_KHR_cooperative_matrix",
    c"VK_NV_cooperative_matrix",
    c"VK_NV_cooperative_matrix2",
    super::bf16::EXTENSION,
];

/// Which of [`MATRIX_EXTENSIONS`] a Vulkan adapter's driver offers (from the extension list
/// wgpu-hal read when it enumerated the adapter).
fn matrix_extensions(a: &wgpu::Adapter) -> Vec<String> {
    // SAFETY: the hal adapter is only read (its cached properties), while `a` is alive.
    let Some(hal) = (unsafe { a.as_hal::<wgpu::hal::api::Vulkan>() }) else {
        return vec![];
    };
    let props = hal.physical_device_capabilities();
    MATRIX_EXTENSIONS
        .iter()
        .filter(|e| props.supports_extension(e))
        .map(|e| e.to_string_lossy().into_owned())
        .collect()
}

impl AdapterReport {
    pub fn new(a: &wgpu::Adapter) -> Self {
        let info = a.get_info();
        AdapterReport {
            name: info.name.clone(),
            backend: backend_name(info.backend).into(),
            device_type: device_type_name(info.device_type).into(),
            driver: info.driver.clone(),
            driver_info: info.driver_info.clone(),
            vendor: info.vendor,
            device: info.device,
            caps: AdapterCaps::from_adapter(a),
            matrix_extensions: matrix_extensions(a),
        }
    }
}

fn new_instance(backends: wgpu::Backends) -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backends;
    // Validation in debug builds only: numbers come from release builds (DESIGN.md section 2).
    desc.flags = wgpu::InstanceFlags::from_build_config().with_env();
    wgpu::Instance::new(desc)
}

/// Every adapter wgpu finds for the selected backends, best first.
pub fn enumerate(sel: &AdapterSelection) -> Result<(wgpu::Instance, Vec<wgpu::Adapter>)> {
    let backends = sel.backends()?;
    let instance = new_instance(backends);
    let mut adapters = pollster::block_on(instance.enumerate_adapters(backends));
    adapters.sort_by_key(|a| rank(&a.get_info()));
    Ok((instance, adapters))
}

/// The adapters matching `sel` (backend and name), best first; none is an error
/// ([`Error::NoAdapter`]) that says what was asked for and what exists.
pub fn select(sel: &AdapterSelection) -> Result<(wgpu::Instance, Vec<wgpu::Adapter>)> {
    let (instance, adapters) = enumerate(sel)?;
    let filter = sel.name_filter();
    let matching: Vec<wgpu::Adapter> = adapters
        .into_iter()
        .filter(|a| match &filter {
            Some(f) => a.get_info().name.to_lowercase().contains(f),
            None => true,
        })
        .collect();
    if matching.is_empty() {
        return Err(no_adapter(sel));
    }
    Ok((instance, matching))
}

/// What was asked for, what exists on any backend, and the hint that fits: a software driver to
/// install only when wgpu sees no adapter at all; the platform of a backend that cannot exist here.
fn no_adapter(sel: &AdapterSelection) -> Error {
    let filter = sel.name_filter();
    let wanted = match (&sel.backend, &filter) {
        (b, Some(f)) => format!(
            "none has a name containing `{f}` (backend {})",
            b.as_deref().unwrap_or("any")
        ),
        (Some(b), None) => format!("none on backend `{b}`"),
        (None, None) => "wgpu found none at all".to_string(),
    };
    let every = enumerate(&AdapterSelection::default())
        .map(|(_, a)| a)
        .unwrap_or_default();
    let seen = if every.is_empty() {
        "none found; on Linux without a GPU install a software driver \
         (apt-get install mesa-vulkan-drivers)"
            .to_string()
    } else {
        every
            .iter()
            .map(|a| {
                let i = a.get_info();
                format!("{} ({})", i.name, backend_name(i.backend))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let b = sel.backend.as_deref().unwrap_or("").to_ascii_lowercase();
    let platform = if b.contains("metal") && !cfg!(target_vendor = "apple") {
        " (Metal exists only on Apple platforms)"
    } else if b.contains("dx12") && !cfg!(windows) {
        " (DX12 exists only on Windows)"
    } else {
        ""
    };
    Error::NoAdapter(format!("{wanted}{platform}; adapters seen: {seen}"))
}

/// An open device plus what the runner needs to report errors instead of panicking.
pub struct Gpu {
    pub instance: wgpu::Instance,
    pub adapter: wgpu::Adapter,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub report: AdapterReport,
    pub caps: AdapterCaps,
    /// Errors no error scope caught (wgpu would otherwise panic on them).
    uncaptured: Arc<Mutex<Vec<String>>>,
    lost: Arc<Mutex<Option<String>>>,
    /// Milliseconds spent in instance + adapter + device creation (the first CPU-lane phase).
    pub setup_ms: f64,
    /// When `Gpu::open` started (places device creation on a trace's CPU lane).
    pub opened_at: std::time::Instant,
    /// How long [`Gpu::wait`] waits for submitted work before it gives up ([`Gpu::DEFAULT_TIMEOUT`]).
    pub wait_timeout: std::time::Duration,
    /// Held by [`Gpu::submit`] and by each poll of [`Gpu::wait`]: threads sharing this device (the
    /// tests') never run wgpu-core's `Device::maintain` at once, where wgpu-core 30.0.2 can panic
    /// on a stale fence read ("If the queue is empty, the current submission index … should be
    /// at least the wait submission index"; fixed upstream after 30.0.2).
    maintain: Mutex<()>,
}

impl Gpu {
    /// Opens the best adapter matching `sel`, requesting timestamps and those of `wanted` (the
    /// features of the variants about to run) that the adapter has. `caps` then describes the
    /// *device*, so a plan builder sees a missing feature and says so.
    pub fn open(sel: &AdapterSelection, wanted: wgpu::Features) -> Result<Gpu> {
        let t0 = std::time::Instant::now();
        let (instance, adapters) = select(sel)?;
        let adapter = adapters.into_iter().next().ok_or_else(|| no_adapter(sel))?;

        let mut caps = AdapterCaps::from_adapter(&adapter);
        let mut report = AdapterReport::new(&adapter);
        // Request what runs need: timestamps when the adapter has them (without them the runner
        // reports host times only and says so) and the variants' features the adapter has. The
        // adapter's own limits are requested so that large problems can bind large buffers.
        let features = (wgpu::Features::TIMESTAMP_QUERY | wanted) & adapter.features();
        let desc = wgpu::DeviceDescriptor {
            label: Some("attn-wgpu"),
            required_features: features,
            required_limits: adapter.limits(),
            // Cooperative matrices are an experimental wgpu feature: opted into only when a
            // variant that needs them is about to run (tiled-coop) and the adapter has them.
            experimental_features: if features
                .contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
            {
                // SAFETY: wgpu asks callers to acknowledge that experimental features may have
                // bugs; tiled-coop's results are validated against the f64 reference on every run.
                unsafe { wgpu::ExperimentalFeatures::enabled() }
            } else {
                wgpu::ExperimentalFeatures::disabled()
            },
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        // bf16 cooperative matrices and VK_NV_cooperative_matrix2, which wgpu does not request:
        // where a SPIR-V matrix kernel may run (cooperative matrices and passthrough shaders
        // requested) and the driver offers them, the device is opened through wgpu-hal with
        // VK_KHR_shader_bfloat16 and / or VK_NV_cooperative_matrix2 added (src/gpu/open.rs);
        // wgpu's own opening otherwise, or if that fails, with the reasons kept.
        let matrix_kernels =
            wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX | wgpu::Features::PASSTHROUGH_SHADERS;
        let (bf16_offered, cm2_offered) = if features.contains(matrix_kernels) {
            (
                super::bf16::offered(&adapter),
                super::cm2::offered(&adapter),
            )
        } else {
            let why = "not requested (no variant about to run uses SPIR-V cooperative matrices)";
            (Err(why.to_string()), Err(why.to_string()))
        };
        // If the opening with both fails, again without VK_NV_cooperative_matrix2: the bf16
        // builds, measured, must not depend on the newer extension.
        let (bf16_offered, mut cm2_offered) = (bf16_offered, cm2_offered);
        let mut opened = Err(String::new());
        if bf16_offered.is_ok() || cm2_offered.is_ok() {
            opened =
                super::open::request(&adapter, &desc, bf16_offered.is_ok(), cm2_offered.is_ok());
            if let Err(why) = &opened {
                if bf16_offered.is_ok() && cm2_offered.is_ok() {
                    cm2_offered = Err(why.clone());
                    opened = super::open::request(&adapter, &desc, true, false);
                }
            }
        }
        let (device, queue, bf16_matrix, cm2) = match opened {
            Ok((d, q)) => {
                let bf16 = match bf16_offered {
                    Ok(()) => super::bf16::Bf16Matrix::On,
                    Err(why) => super::bf16::Bf16Matrix::Off(why),
                };
                let cm2 = match cm2_offered {
                    Ok(()) => super::cm2::Cm2::On,
                    Err(why) => super::cm2::Cm2::Off(why),
                };
                (d, q, bf16, cm2)
            }
            Err(failed) => {
                let (d, q) =
                    pollster::block_on(adapter.request_device(&desc)).map_err(|e| Error::Gpu {
                        stage: format!("request_device on `{}`", report.name),
                        message: e.to_string(),
                    })?;
                // Each one's reason: not offered, or offered and the opening with it failed.
                let why = |offered: Result<(), String>| offered.err().unwrap_or(failed.clone());
                (
                    d,
                    q,
                    super::bf16::Bf16Matrix::Off(why(bf16_offered)),
                    super::cm2::Cm2::Off(why(cm2_offered)),
                )
            }
        };
        caps.bf16_matrix = bf16_matrix.clone();
        report.caps.bf16_matrix = bf16_matrix;
        caps.cm2 = cm2.clone();
        report.caps.cm2 = cm2;

        let f = device.features();
        caps.timestamps = f.contains(wgpu::Features::TIMESTAMP_QUERY);
        caps.f16 = f.contains(wgpu::Features::SHADER_F16);
        caps.subgroups = f.contains(wgpu::Features::SUBGROUP);
        caps.subgroup_barrier = f.contains(wgpu::Features::SUBGROUP_BARRIER);
        caps.cooperative_matrix = f.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX);
        caps.float32_atomics = f.contains(wgpu::Features::SHADER_FLOAT32_ATOMIC);
        caps.passthrough = f.contains(wgpu::Features::PASSTHROUGH_SHADERS);
        let uncaptured = Arc::new(Mutex::new(Vec::new()));
        let sink = uncaptured.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            if let Ok(mut v) = sink.lock() {
                v.push(e.to_string());
            }
        }));
        let lost = Arc::new(Mutex::new(None));
        let lost_sink = lost.clone();
        device.set_device_lost_callback(move |reason, msg| {
            if let Ok(mut l) = lost_sink.lock() {
                *l = Some(format!("{reason:?}: {msg}"));
            }
        });
        let gpu = Gpu {
            instance,
            adapter,
            device,
            queue,
            report,
            caps,
            uncaptured,
            lost,
            setup_ms: t0.elapsed().as_secs_f64() * 1e3,
            opened_at: t0,
            wait_timeout: Gpu::DEFAULT_TIMEOUT,
            maintain: Mutex::new(()),
        };
        Ok(gpu)
    }

    /// A shader module from SPIR-V (little-endian words, entry point `main`) handed to the driver
    /// as it is, through PASSTHROUGH_SHADERS: wgpu neither translates nor checks it.
    ///
    /// # Safety
    /// The module must be valid SPIR-V for this device whose bindings match the pipeline layout it
    /// is used with and whose memory accesses stay in bounds (the project's own GLSL kernels,
    /// compiled by build.rs).
    pub unsafe fn spirv_module(&self, label: &str, spirv: &[u8]) -> wgpu::ShaderModule {
        let words: Vec<u32> = spirv
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        // SAFETY: the caller's contract above.
        unsafe {
            self.device
                .create_shader_module_passthrough(wgpu::ShaderModuleDescriptorPassthrough {
                    label: Some(label),
                    entry_points: std::borrow::Cow::Borrowed(&[
                        wgpu::PassthroughShaderEntryPoint {
                            name: std::borrow::Cow::Borrowed("main"),
                            workgroup_size: (0, 0, 0),
                        },
                    ]),
                    spirv: Some(std::borrow::Cow::Owned(words)),
                    ..Default::default()
                })
        }
    }

    /// Records the cooperative-matrix element layout a probe found ([`crate::device::open`]): a
    /// property of the adapter's driver, so reports show it with the adapter.
    pub fn set_coop_layout(&mut self, layout: CoopLayout) {
        self.caps.coop_layout = layout.clone();
        self.report.caps.coop_layout = layout;
    }

    /// Records that bf16 cooperative matrices cannot be used after all ([`crate::device::open`]:
    /// the bf16 layout probe disagreed).
    pub fn set_bf16_matrix(&mut self, m: super::bf16::Bf16Matrix) {
        self.caps.bf16_matrix = m.clone();
        self.report.caps.bf16_matrix = m;
    }

    /// Runs `f` inside validation and out-of-memory error scopes; any error becomes `Error::Gpu`
    /// naming `stage`.
    pub fn scoped<T>(&self, stage: &str, f: impl FnOnce() -> T) -> Result<T> {
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let val = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let out = f();
        let v = pollster::block_on(val.pop());
        let o = pollster::block_on(oom.pop());
        if let Some(e) = v.or(o) {
            return Err(Error::Gpu {
                stage: stage.to_string(),
                message: e.to_string(),
            });
        }
        self.check(stage)?;
        Ok(out)
    }

    /// Fails if the device was lost or an uncaptured error was recorded since the last check.
    pub fn check(&self, stage: &str) -> Result<()> {
        if let Some(l) = self.lost.lock().ok().and_then(|l| l.clone()) {
            return Err(Error::DeviceLost(format!("{l} (during {stage})")));
        }
        if let Ok(mut v) = self.uncaptured.lock() {
            if !v.is_empty() {
                let msg = v.join("; ");
                v.clear();
                return Err(Error::Gpu {
                    stage: stage.to_string(),
                    message: msg,
                });
            }
        }
        Ok(())
    }

    /// Submits `cmds` to the queue (holding the lock [`Gpu::wait`] polls under: a submit runs
    /// wgpu-core's `Device::maintain` too).
    pub fn submit(&self, cmds: impl IntoIterator<Item = wgpu::CommandBuffer>) {
        let _one = self.maintain.lock().unwrap_or_else(|e| e.into_inner());
        self.queue.submit(cmds);
    }

    /// The default of [`Gpu::wait_timeout`] (`--gpu-timeout`): long enough for the largest
    /// software-adapter runs docs/sample-output.md shows, short enough that a hung GPU is reported.
    pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

    /// Blocks until all submitted work is done, in slices of at most one second (so that a lost
    /// device is seen between them), for at most [`Gpu::wait_timeout`]; then fails with
    /// [`Error::Timeout`] naming `stage`.
    pub fn wait(&self, stage: &str) -> Result<()> {
        let start = std::time::Instant::now();
        let slice = std::time::Duration::from_secs(1);
        loop {
            let left = self.wait_timeout.saturating_sub(start.elapsed());
            let polled = {
                let _one = self.maintain.lock().unwrap_or_else(|e| e.into_inner());
                self.device.poll(wgpu::PollType::Wait {
                    submission_index: None,
                    timeout: Some(left.min(slice)),
                })
            };
            match polled {
                Ok(_) => break,
                Err(wgpu::PollError::Timeout) if !left.is_zero() && left > slice => {
                    self.check(stage)?;
                }
                Err(wgpu::PollError::Timeout) => {
                    self.check(stage)?;
                    return Err(Error::Timeout {
                        stage: stage.to_string(),
                        seconds: self.wait_timeout.as_secs_f64(),
                    });
                }
                Err(e) => {
                    return Err(Error::Gpu {
                        stage: stage.to_string(),
                        message: e.to_string(),
                    })
                }
            }
        }
        self.check(stage)
    }
}
