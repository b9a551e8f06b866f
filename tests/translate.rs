//! Portability without the hardware: every WGSL module the variants can build, with every `override`
//! configuration they choose, goes through naga 30.0.2 (the translator wgpu 30 itself runs) for every
//! backend each variant claims:
//!
//! 1. WGSL front end, then validation with the capabilities the variant declares (`needs`);
//! 2. pipeline constants substituted (`process_overrides`, as wgpu-hal does before writing);
//! 3. the backend's writer: SPIR-V (Vulkan), MSL (Metal), HLSL (DX12), GLSL (GL);
//! 4. where Debian ships a real validator for the output, that validator: `spirv-val` (package
//!    spirv-tools) on the SPIR-V, `glslangValidator` (package glslang-tools) on the GLSL.
//!
//! The configurations are not listed here: they are collected by building every registered
//! variant's plan over a set of problems and adapter capabilities (below), so new variants, kernels
//! and tile choices are picked up automatically.
//!
//! The declarations are checked against the shaders in both directions: a variant must validate
//! with only the features it declares; every feature it declares must be needed by one of its
//! shaders; a backend a variant does not claim for lack of a feature must indeed fail validation
//! without it.
//!
//! And workgroup storage, which is what limits the cooperative-matrix kernels on the H200
//! (results/EXPERIMENTS.md, v34-bwd-kv-direct): every kernel's workgroup arrays, after its pipeline
//! constants, fit the smallest adapter its plan was accepted for (else pipeline creation fails
//! where the variant should have been refused with a reason), and equal what the fused plans
//! report as `workgroup_storage_bytes`.
//!
//! A missing external validator is a FAILURE with the command that installs it (.ci/run installs
//! both). `ATTN_WGPU_SKIP_EXTERNAL_VALIDATORS=1` skips only those two tools, and says so loudly.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::Command;

use attn_wgpu::gpu::AdapterCaps;
use attn_wgpu::mask;
use attn_wgpu::plan::Plan;
use attn_wgpu::probe;
use attn_wgpu::problem::{Convention, DType, Inputs, Problem};
use attn_wgpu::variants::{self, feature_names, Backend, VARIANTS};
use naga::back::{glsl, hlsl, msl, spv};
use naga::proc::{BoundsCheckPolicies, BoundsCheckPolicy};
use naga::valid::{Capabilities, ModuleInfo, ValidationFlags, Validator};
use naga::ShaderStage;

/// The problems plans are built for: every head dimension class, tiny and large N, causal or not,
/// every storage dtype, and each with and without a mask bias (key padding normalized into an
/// additive bias, as `--key-padding` does), so every dtype and mask prelude is composed; the small
/// ones also in training mode (`--backward`) and with dropout.
fn problems() -> Vec<Problem> {
    let mut v = Vec::new();
    for d in [16, 64, 128, 256] {
        for n in [1, 100, 2048] {
            for causal in [false, true] {
                for dtype in DType::ALL {
                    let mut p = Problem::new(1, 2, n, d, causal, 0);
                    p.dtype = dtype;
                    v.push(p.clone());
                    let mut inputs = Inputs::generate(&p);
                    mask::normalize(
                        &mut p,
                        &mut inputs,
                        None,
                        Convention::Sdpa,
                        Some(&[n.div_ceil(2)]),
                    )
                    .expect("key padding");
                    assert!(p.mask.bias.is_some());
                    // Training plans (--backward) too: their backward kernels and the forward
                    // that keeps L.
                    // And with dropout (the Philox prelude, the dropout dispatch), in both.
                    if n <= 100 {
                        for q in [v.last().cloned().unwrap(), p.clone()] {
                            v.push(Problem {
                                backward: true,
                                ..q.clone()
                            });
                            for backward in [false, true] {
                                v.push(Problem {
                                    backward,
                                    dropout: 0.1,
                                    ..q.clone()
                                });
                            }
                        }
                    }
                    v.push(p);
                }
            }
        }
    }
    // D = 80 in training: the fused backward's 32 x 32 tile staged in 16 bits at its smallest
    // width (tiled_bwd_d80h.wgsl, taken where D = 128's does not fit), with and without dropout.
    for dtype in [DType::F16, DType::BF16] {
        for dropout in [0.0, 0.1] {
            let mut p = Problem::new(1, 2, 100, 80, true, 0);
            p.dtype = dtype;
            p.backward = true;
            p.dropout = dropout;
            v.push(p);
        }
    }
    // D = 256 in training on the fused backward's 32 x 32 tile walking D in four chunks (asked
    // for with --bwd-tile 32: tiled_bwd_d256h.wgsl staged in 16 bits, tiled_bwd_d256c.wgsl in
    // f32), with and without dropout.
    for dtype in DType::ALL {
        for dropout in [0.0, 0.1] {
            let mut p = Problem::new(1, 2, 100, 256, true, 0);
            p.dtype = dtype;
            p.backward = true;
            p.dropout = dropout;
            p.bwd_tile = Some(32);
            v.push(p);
        }
    }
    // `tiled`'s one-pass backward (--bwd-dq atomic: dQ added by float atomics in the dK/dV pass,
    // tiled_bwd_kv_dq.wgsl, with tiled_bwd_dq_zero.wgsl and narrow.wgsl) at D = 64 in
    // every dtype and at D = 128 in f16, with and without dropout.
    for (d, dtype) in [
        (64, DType::F32),
        (64, DType::F16),
        (64, DType::BF16),
        (128, DType::F16),
    ] {
        for dropout in [0.0, 0.1] {
            let mut p = Problem::new(1, 2, 100, d, true, 0);
            p.dtype = dtype;
            p.backward = true;
            p.dropout = dropout;
            p.bwd_dq_atomic = true;
            v.push(p);
        }
    }
    // Decode shapes (N = 1, many keys; GQA): the split-KV kernels, inference and training.
    for dtype in DType::ALL {
        for backward in [false, true] {
            let mut p = Problem::new(1, 4, 1, 64, false, 0);
            p.kv_seq = 4096;
            p.kv_heads = 2;
            p.dtype = dtype;
            p.backward = backward;
            v.push(p.clone());
            v.push(Problem {
                dropout: 0.1,
                ..p.clone()
            });
            // D = 256: two 16-byte words per lane of a 16-lane key row (WPL = 2).
            v.push(Problem { head_dim: 256, ..p });
        }
    }
    v
}

/// Adapter capabilities "as backend `b` would offer them": workgroup storage 16/32/48 KiB, with
/// every shader feature the backend can have and with none (an adapter of that backend without
/// them), so every fallback a plan builder may pick is seen; and 24 and 40 KiB with every
/// feature, where the fused backward takes its in-between tiles (8 x 8 at D = 64, 16 x 16 at
/// D = 128: tiled_bwd.rs, `Tile::pick`).
fn caps_for(b: Backend) -> Vec<AdapterCaps> {
    let mut v = Vec::new();
    for storage in [24 << 10, 40 << 10] {
        let mut c = AdapterCaps::webgpu_defaults().with_shader_features(b.features());
        c.backend = b.name().into();
        c.max_workgroup_storage = storage;
        v.push(c);
    }
    for storage in [16 << 10, 32 << 10, 48 << 10] {
        // All of the backend's features, none, all but SUBGROUP (an adapter with f16 and no
        // subgroups: `tiled` then takes its subgroup-free kernel), and each of those without
        // SHADER_FLOAT32_ATOMIC (an adapter without float atomics: `tiled`'s `--bwd-dq atomic`
        // is refused there), each feature set once.
        let without_subgroups = b.features() - wgpu::Features::SUBGROUP;
        let atomic = wgpu::Features::SHADER_FLOAT32_ATOMIC;
        let mut sets = vec![
            b.features(),
            b.features() - atomic,
            without_subgroups,
            without_subgroups - atomic,
            wgpu::Features::empty(),
        ];
        sets.dedup();
        for features in sets {
            let mut c = AdapterCaps::webgpu_defaults().with_shader_features(features);
            c.backend = b.name().into();
            c.max_workgroup_storage = storage;
            v.push(c.clone());
            // Kernels written for one subgroup width (tiled-coop: 32) build only on adapters
            // that report exactly that width.
            if c.subgroups {
                c.subgroup_min_size = 32;
                c.subgroup_max_size = 32;
                v.push(c);
            }
        }
    }
    v
}

/// Who declares what a set of plans needs: one variant for one dtype (its effective needs,
/// `Variant::effective_needs`), or one probe kernel (src/probe.rs), which is not a variant.
#[derive(Clone)]
struct Claim {
    /// `tiled f16`, `probe-fma-f16`.
    name: String,
    /// The features its plans are validated with (the same for every plan of the claim).
    needs: wgpu::Features,
    /// Backends left out by hand (`Variant::excludes`), with the reason.
    excludes: Vec<(Backend, &'static str)>,
}

impl Claim {
    /// The backends it must translate for: those offering `needs`, less the excluded ones.
    fn backends(&self) -> Vec<Backend> {
        Backend::ALL
            .into_iter()
            .filter(|b| {
                b.features().contains(self.needs) && !self.excludes.iter().any(|(x, _)| x == b)
            })
            .collect()
    }

    fn unsupported_on(&self, b: Backend) -> Option<String> {
        if let Some((_, why)) = self.excludes.iter().find(|(x, _)| *x == b) {
            return Some(format!(
                "`{}` is not claimed on {}: {why}",
                self.name,
                b.name()
            ));
        }
        let missing = self.needs - b.features();
        (!missing.is_empty()).then(|| {
            format!(
                "`{}` needs {}, which wgpu's {} backend does not offer",
                self.name,
                feature_names(missing),
                b.name()
            )
        })
    }
}

/// The probe kernels as claims with their plans: copy and f32 FMA need nothing, f16 FMA needs
/// SHADER_F16 (src/probe.rs runs it only where the adapter has it).
fn probe_plans() -> Vec<(Claim, Vec<Plan>)> {
    let claim = |name: &str, needs| Claim {
        name: name.into(),
        needs,
        excludes: vec![],
    };
    let max_dim = AdapterCaps::webgpu_defaults().max_workgroups_per_dimension;
    // The sizes `ProbeSize::for_adapter` picks on a CPU and on a GPU.
    let fma = |f16| {
        [(64, 512), (8192, 4096)]
            .into_iter()
            .map(|(groups, iters)| probe::fma_plan(f16, groups, iters, max_dim))
            .collect()
    };
    vec![
        (
            claim("probe-copy", wgpu::Features::empty()),
            vec![probe::copy_plan(64 << 20, max_dim)],
        ),
        (claim("probe-fma-f32", wgpu::Features::empty()), fma(false)),
        (
            claim("probe-fma-f16", wgpu::Features::SHADER_F16),
            fma(true),
        ),
    ]
}

/// The WGSL steps of `unfused-coop` (scale, mask and softmax over f16 or bf16 scores:
/// shaders/scores_{f16,bf16}.wgsl), as one claim: the loop over the variants skips `unfused-coop`
/// for its SPIR-V products, so its plans (on an adapter as the H100 offers itself, bf16 matrices
/// included) are collected here with those two dispatches left out.
fn matrix_wgsl_plans(problems: &[Problem]) -> (Claim, Vec<Plan>) {
    let mut caps = common::matrix_adapter();
    caps.bf16_matrix = attn_wgpu::gpu::Bf16Matrix::On;
    // Inference only: training keeps f32 scores (unfused-inplace's kernels, checked above), and
    // leaving out its products would break the plan's saved-tensor versions.
    let plans: Vec<Plan> = problems
        .iter()
        .filter(|p| !p.backward)
        .filter_map(|p| variants::plan("unfused-coop", p, &caps).ok())
        .map(|mut plan| {
            plan.dispatches.retain(|d| !d.shader.is_spirv());
            plan
        })
        .collect();
    assert!(
        plans
            .iter()
            .any(|p| p.dispatches[0].shader.file.contains("scores_bf16")),
        "no unfused-coop plan with bf16 scores"
    );
    let claim = Claim {
        name: "unfused-coop's WGSL steps".into(),
        needs: wgpu::Features::SHADER_F16,
        excludes: vec![],
    };
    (claim, plans)
}

/// One plan's use of a configuration: by which claim, on which backend's capabilities.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct User {
    /// Index into the claims of [`Collected`].
    claim: usize,
    backend: Backend,
}

/// One distinct module + entry + override configuration.
struct Config {
    file: &'static str,
    /// The composition (`f16+mask`: dtype and mask preludes), empty for plain kernels.
    tag: &'static str,
    source: &'static str,
    entry: &'static str,
    overrides: Vec<(String, f64)>,
    users: BTreeSet<User>,
    /// The smallest `max_workgroup_storage` of the adapters a plan with this configuration was
    /// built for: the kernel's workgroup arrays must fit in it.
    min_storage: u32,
    /// The workgroup storage its plans report (`config.workgroup_storage_bytes`, for the
    /// `attention` dispatch of the fused forward plans), if they report it.
    declared_storage: BTreeSet<u64>,
}

impl Config {
    fn label(&self) -> String {
        let o: Vec<String> = self
            .overrides
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let tag = if self.tag.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.tag)
        };
        format!("{}{tag}:{} [{}]", self.file, self.entry, o.join(" "))
    }
}

type Key = (&'static str, usize, &'static str, Vec<(String, u64)>);

struct Collected {
    claims: Vec<Claim>,
    configs: Vec<Config>,
    /// Plans built per (claim, backend).
    plans: BTreeMap<(usize, Backend), usize>,
}

/// Builds every variant's plan over `problems()` x `caps_for(b)` for every backend the variant
/// claims, plus the probe plans, and dedupes the dispatches by (file, source, entry, overrides).
/// Each plan is attributed to its claim (variant and dtype), whose effective needs must be the
/// same for all its plans.
fn collect() -> Collected {
    let problems = problems();
    let mut claims: Vec<Claim> = Vec::new();
    let mut map: BTreeMap<Key, Config> = BTreeMap::new();
    let mut plans: BTreeMap<(usize, Backend), usize> = BTreeMap::new();
    let add = |map: &mut BTreeMap<Key, Config>, plan: &Plan, user: User, storage: u32| {
        for d in &plan.dispatches {
            let key: Key = (
                d.shader.file,
                d.shader.source.as_ptr() as usize,
                d.entry,
                d.overrides
                    .iter()
                    .map(|(k, x)| (k.clone(), x.to_bits()))
                    .collect(),
            );
            let c = map.entry(key).or_insert_with(|| Config {
                file: d.shader.file,
                tag: d.shader.tag,
                source: d.shader.source,
                entry: d.entry,
                overrides: d.overrides.clone(),
                users: BTreeSet::new(),
                min_storage: u32::MAX,
                declared_storage: BTreeSet::new(),
            });
            c.users.insert(user);
            c.min_storage = c.min_storage.min(storage);
            let declared = plan
                .config
                .iter()
                .find(|(k, _)| k == "workgroup_storage_bytes");
            if let (Some((_, bytes)), "attention") = (declared, d.name.as_str()) {
                c.declared_storage.insert(*bytes as u64);
            }
        }
    };
    for v in VARIANTS {
        // The SPIR-V kernel (`tiled-coop-vk`, the one variant that wants PASSTHROUGH_SHADERS) is
        // GLSL compiled by glslang at build time, not WGSL: naga can neither read nor translate
        // it (tests/coop_vk.rs checks its plans; its backward is tiled-coop's WGSL, checked here).
        if v.wants.contains(wgpu::Features::PASSTHROUGH_SHADERS) {
            continue;
        }
        for &dtype in v.requires.dtypes {
            // One claim per feature set a plan can use: the variant's effective needs, plus each
            // subset of its optional `wants` (used where an adapter offers them; e.g. `tiled`
            // takes its v2 kernel with SUBGROUP). A plan is attributed to the claim of the
            // features it uses (`Variant::plan_needs`).
            let mut any = Problem::new(1, 1, 1, 16, false, 0);
            any.dtype = dtype;
            let base = v.effective_needs(&any);
            // Every subset of `wants` (e.g. `tiled`: SUBGROUP, SHADER_FLOAT32_ATOMIC, both, neither).
            let bits: Vec<wgpu::Features> = v.wants.iter().collect();
            let options: Vec<wgpu::Features> = (0..1u32 << bits.len())
                .map(|m| {
                    bits.iter()
                        .enumerate()
                        .filter(|(i, _)| m & (1 << i) != 0)
                        .fold(wgpu::Features::empty(), |a, (_, f)| a | *f)
                })
                .collect();
            for opt in options {
                let claim = claims.len();
                let suffix = if opt.is_empty() {
                    String::new()
                } else {
                    format!(" +{}", feature_names(opt))
                };
                claims.push(Claim {
                    name: format!("{} {}{suffix}", v.name, dtype.name()),
                    needs: base | opt,
                    excludes: v.excludes.to_vec(),
                });
                for b in Backend::ALL {
                    let count = plans.entry((claim, b)).or_insert(0);
                    for caps in caps_for(b) {
                        if caps.shader_features() & v.wants != opt {
                            continue;
                        }
                        for p in problems.iter().filter(|p| p.dtype == dtype) {
                            assert!(v.plan_needs(p, &caps) == claims[claim].needs);
                            let plan = match variants::plan(v.name, p, &caps) {
                                Ok(plan) => plan,
                                // Refused only for the in-place hazard: its kernels still
                                // translate (tests/backward.rs runs that plan to show the harm).
                                Err(attn_wgpu::Error::Incompatible { reason, .. })
                                    if reason.contains("in-place hazard") =>
                                {
                                    (v.build)(p, &caps).expect("the unchecked plan builds")
                                }
                                Err(_) => continue,
                            };
                            *count += 1;
                            let user = User { claim, backend: b };
                            add(&mut map, &plan, user, caps.max_workgroup_storage);
                        }
                    }
                }
            }
        }
    }
    for (c, ps) in probe_plans()
        .into_iter()
        .chain([matrix_wgsl_plans(&problems)])
    {
        let claim = claims.len();
        for b in c.backends() {
            for plan in &ps {
                plan.check().expect("probe plan");
                *plans.entry((claim, b)).or_insert(0) += 1;
                // The probes run on any adapter: WebGPU's minimum workgroup storage.
                let storage = AdapterCaps::webgpu_defaults().max_workgroup_storage;
                add(&mut map, plan, User { claim, backend: b }, storage);
            }
        }
        claims.push(c);
    }
    Collected {
        claims,
        configs: map.into_values().collect(),
        plans,
    }
}

fn naga_caps(features: wgpu::Features, b: Backend) -> Capabilities {
    let downlevel = match b {
        // What wgpu-hal 30's GL backend (gles/adapter.rs) gives every compute-capable context:
        // not compliant, but always SHADER_F16_IN_F32 (GLSL 4.20 / ES 3.00 packHalf2x16), which
        // naga needs for `pack2x16float` / `unpack2x16float` (math's f16 storage, dtype_f16x2.wgsl).
        Backend::Gl => {
            wgpu::DownlevelFlags::COMPUTE_SHADERS | wgpu::DownlevelFlags::SHADER_F16_IN_F32
        }
        // Compliant, SHADER_F16_IN_F32 included. (wgpu-hal clears that flag on Vulkan llvmpipe
        // adapters without SHADER_F16; lavapipe has SHADER_F16, so it keeps it.)
        _ => wgpu::DownlevelFlags::compliant(),
    };
    wgpu_naga_bridge::features_to_naga_capabilities(features, downlevel)
}

fn validate(module: &naga::Module, caps: Capabilities) -> Result<ModuleInfo, String> {
    Validator::new(ValidationFlags::all(), caps)
        .validate(module)
        .map_err(|e| format!("{e:?}").lines().next().unwrap_or("").to_string())
}

fn policies(on: bool) -> BoundsCheckPolicies {
    let p = if on {
        BoundsCheckPolicy::Restrict
    } else {
        BoundsCheckPolicy::Unchecked
    };
    BoundsCheckPolicies {
        index: p,
        buffer: p,
        image_load: p,
        binding_array: BoundsCheckPolicy::Unchecked,
    }
}

/// Every resource binding of the module (group, binding).
fn bindings(module: &naga::Module) -> Vec<naga::ResourceBinding> {
    module
        .global_variables
        .iter()
        .filter_map(|(_, g)| g.binding)
        .collect()
}

/// The external validators, or why they are not run.
struct Tools {
    spirv_val: bool,
    glslang: bool,
}

fn tool_present(cmd: &str) -> bool {
    Command::new(cmd).arg("--version").output().is_ok()
}

fn tools() -> Tools {
    let skip = std::env::var("ATTN_WGPU_SKIP_EXTERNAL_VALIDATORS").is_ok_and(|s| s == "1");
    let spirv_val = tool_present("spirv-val");
    let glslang = tool_present("glslangValidator");
    if skip {
        eprintln!(
            "\n!!!!!!!! ATTN_WGPU_SKIP_EXTERNAL_VALIDATORS=1: spirv-val and glslangValidator are \
             NOT run; only naga's own validation and writers are checked !!!!!!!!\n"
        );
        return Tools {
            spirv_val: false,
            glslang: false,
        };
    }
    let mut missing = Vec::new();
    if !spirv_val {
        missing.push("spirv-val (apt-get install spirv-tools)");
    }
    if !glslang {
        missing.push("glslangValidator (apt-get install glslang-tools)");
    }
    assert!(
        missing.is_empty(),
        "external shader validators missing: {}. .ci/run installs them; \
         ATTN_WGPU_SKIP_EXTERNAL_VALIDATORS=1 skips them explicitly.",
        missing.join(", ")
    );
    Tools { spirv_val, glslang }
}

/// Runs `cmd args.. file` on `bytes` written to a temporary file named `name`.
fn run_tool(cmd: &str, args: &[&str], name: &str, bytes: &[u8]) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join(name);
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| e.to_string())?;
    let out = Command::new(cmd)
        .args(args)
        .arg(&path)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd} {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Writes `module` (overrides applied) for backend `b` in every target configuration wgpu 30 may
/// use there, and runs the external validator where there is one. Returns the targets written.
fn write_for(
    b: Backend,
    module: &naga::Module,
    info: &ModuleInfo,
    entry: &str,
    needs: wgpu::Features,
    tools: &Tools,
) -> Result<Vec<String>, String> {
    let mut done = Vec::new();
    let binds = bindings(module);
    let advanced = needs
        .intersects(wgpu::Features::SUBGROUP | wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX);
    match b {
        Backend::Vulkan => {
            // SPIR-V 1.0 for Vulkan 1.0 devices; 1.6 for Vulkan 1.3 (lavapipe, the H200).
            let versions: &[((u8, u8), &str)] = if advanced {
                &[((1, 6), "vulkan1.3")]
            } else {
                &[((1, 0), "vulkan1.0"), ((1, 6), "vulkan1.3")]
            };
            for &(lang, env) in versions {
                for checks in [true, false] {
                    let options = spv::Options {
                        lang_version: lang,
                        bounds_check_policies: policies(checks),
                        ..Default::default()
                    };
                    let pipeline = spv::PipelineOptions {
                        shader_stage: ShaderStage::Compute,
                        entry_point: entry.into(),
                    };
                    let words = spv::write_vec(module, info, &options, Some(&pipeline))
                        .map_err(|e| format!("SPIR-V {lang:?} writer: {e}"))?;
                    // Debian bookworm's spirv-tools (2022.4) predates SPV_KHR_cooperative_matrix and
                    // rejects its capability as unknown: such modules get naga's validation and
                    // SPIR-V writer only (and run, validated against f64, on the H200).
                    let coop = needs.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX);
                    if tools.spirv_val && !coop {
                        run_tool(
                            "spirv-val",
                            &["--target-env", env],
                            "m.spv",
                            bytemuck::cast_slice(&words),
                        )?;
                    }
                    done.push(if coop {
                        format!("spv{}.{}(naga only)", lang.0, lang.1)
                    } else {
                        format!("spv{}.{}", lang.0, lang.1)
                    });
                }
            }
        }
        Backend::Metal => {
            let lang = if advanced { (3, 0) } else { (2, 4) };
            let resources: BTreeMap<naga::ResourceBinding, msl::BindTarget> = binds
                .iter()
                .map(|rb| {
                    (
                        *rb,
                        msl::BindTarget {
                            buffer: Some(rb.binding as u8),
                            mutable: true,
                            ..Default::default()
                        },
                    )
                })
                .collect();
            for checks in [true, false] {
                let options = msl::Options {
                    lang_version: lang,
                    per_entry_point_map: [(
                        entry.to_string(),
                        msl::EntryPointResources {
                            resources: resources.clone(),
                            immediates_buffer: None,
                            sizes_buffer: Some(30),
                        },
                    )]
                    .into_iter()
                    .collect(),
                    fake_missing_bindings: false,
                    bounds_check_policies: policies(checks),
                    ..Default::default()
                };
                let pipeline = msl::PipelineOptions {
                    entry_point: Some((ShaderStage::Compute, entry.into())),
                    ..Default::default()
                };
                let (_src, ti) = msl::write_string(module, info, &options, &pipeline)
                    .map_err(|e| format!("MSL {lang:?} writer: {e}"))?;
                for r in ti.entry_point_names {
                    r.map_err(|e| format!("MSL {lang:?} entry point: {e}"))?;
                }
                done.push(format!("msl{}.{}", lang.0, lang.1));
            }
        }
        Backend::Dx12 => {
            // FXC (wgpu's default DX12 compiler) takes SM 5.1; DXC SM 6.x (6.2 for f16).
            let models: &[hlsl::ShaderModel] = if needs.contains(wgpu::Features::SHADER_F16) {
                &[hlsl::ShaderModel::V6_2]
            } else if advanced {
                &[hlsl::ShaderModel::V6_0]
            } else {
                &[hlsl::ShaderModel::V5_1, hlsl::ShaderModel::V6_0]
            };
            for &sm in models {
                let options = hlsl::Options {
                    shader_model: sm,
                    binding_map: binds
                        .iter()
                        .map(|rb| {
                            (
                                *rb,
                                hlsl::BindTarget {
                                    space: rb.group as u8,
                                    register: rb.binding,
                                    ..Default::default()
                                },
                            )
                        })
                        .collect(),
                    fake_missing_bindings: false,
                    special_constants_binding: Some(hlsl::BindTarget {
                        space: 0,
                        register: 100,
                        ..Default::default()
                    }),
                    ..Default::default()
                };
                let pipeline = hlsl::PipelineOptions {
                    entry_point: Some((ShaderStage::Compute, entry.into())),
                };
                let mut out = String::new();
                let ri = hlsl::Writer::new(&mut out, &options, &pipeline)
                    .write(module, info, None)
                    .map_err(|e| format!("HLSL SM {} writer: {e}", sm.to_str()))?;
                for r in ri.entry_point_names {
                    r.map_err(|e| format!("HLSL SM {} entry point: {e}", sm.to_str()))?;
                }
                done.push(format!("hlsl{}", sm.to_str()));
            }
        }
        Backend::Gl => {
            // GLES 3.1 (the minimum for compute), desktop GL 4.3 core (the minimum for compute)
            // and 4.5 (what wgpu uses on llvmpipe's GL 4.5 core context; it caps at 450).
            for (version, tag) in [
                (glsl::Version::new_gles(310), "glsl310es"),
                (glsl::Version::Desktop(430), "glsl430"),
                (glsl::Version::Desktop(450), "glsl450"),
            ] {
                let options = glsl::Options {
                    version,
                    writer_flags: glsl::WriterFlags::empty(),
                    binding_map: binds.iter().map(|rb| (*rb, rb.binding as u8)).collect(),
                    zero_initialize_workgroup_memory: true,
                };
                let pipeline = glsl::PipelineOptions {
                    shader_stage: ShaderStage::Compute,
                    entry_point: entry.into(),
                    multiview: None,
                };
                let mut out = String::new();
                glsl::Writer::new(
                    &mut out,
                    module,
                    info,
                    &options,
                    &pipeline,
                    // wgpu-hal's GL backend leaves buffer and index checks to GLSL.
                    policies(false),
                )
                .and_then(|mut w| w.write())
                .map_err(|e| format!("GLSL {tag} writer: {e}"))?;
                if tools.glslang {
                    run_tool(
                        "glslangValidator",
                        &["-S", "comp"],
                        "m.comp",
                        out.as_bytes(),
                    )?;
                }
                done.push(tag.into());
            }
        }
    }
    Ok(done)
}

#[test]
fn every_shader_translates_for_every_claimed_backend() {
    let t0 = std::time::Instant::now();
    let tools = tools();
    let Collected {
        claims,
        configs,
        plans,
    } = collect();
    let mut failures: Vec<String> = Vec::new();
    // The reported-storage check below is not vacuous: the fused forward plans report it.
    assert!(
        configs.iter().any(|c| !c.declared_storage.is_empty()),
        "no plan reports workgroup_storage_bytes for its attention dispatch"
    );

    // Plans are built exactly where the claim says: on every backend offering its effective
    // needs (a claim with no plan there would be vacuous), and on no other.
    for (ci, c) in claims.iter().enumerate() {
        let expected = c.backends();
        for b in Backend::ALL {
            let n = plans.get(&(ci, b)).copied().unwrap_or(0);
            if expected.contains(&b) && n == 0 {
                failures.push(format!(
                    "`{}` claims {} but builds no plan for any test problem there",
                    c.name,
                    b.name()
                ));
            }
            if !expected.contains(&b) && n > 0 {
                failures.push(format!(
                    "`{}` builds {n} plan(s) on {} although {}",
                    c.name,
                    b.name(),
                    c.unsupported_on(b).unwrap_or_default()
                ));
            }
        }
    }

    let mut parsed: BTreeMap<usize, naga::Module> = BTreeMap::new();
    let mut written: BTreeMap<Backend, usize> = BTreeMap::new();
    // Per claim: the needed features its configs proved they need.
    let mut needed: BTreeMap<usize, wgpu::Features> = BTreeMap::new();
    // Per claim and backend: whether all of its configs validate with that backend's features.
    let mut validates_on: BTreeMap<(usize, Backend), bool> = BTreeMap::new();

    for c in &configs {
        let key = c.source.as_ptr() as usize;
        if let std::collections::btree_map::Entry::Vacant(slot) = parsed.entry(key) {
            match naga::front::wgsl::parse_str(c.source) {
                Ok(m) => {
                    slot.insert(m);
                }
                Err(e) => {
                    failures.push(format!(
                        "{}: WGSL parse error:\n{}",
                        c.label(),
                        e.emit_to_string(c.source)
                    ));
                    continue;
                }
            }
        }
        let module = &parsed[&key];
        let constants: naga::back::PipelineConstants = c.overrides.iter().cloned().collect();
        let on_backend: BTreeMap<Backend, bool> = Backend::ALL
            .into_iter()
            .map(|b| (b, validate(module, naga_caps(b.features(), b)).is_ok()))
            .collect();

        // The declaration, both ways, and the backends not claimed.
        let users: BTreeSet<usize> = c.users.iter().map(|u| u.claim).collect();
        for &ci in &users {
            let needs = claims[ci].needs;
            for f in needs.iter() {
                if validate(module, naga_caps(needs - f, Backend::Vulkan)).is_err() {
                    *needed.entry(ci).or_insert(wgpu::Features::empty()) |= f;
                }
            }
            for b in Backend::ALL {
                *validates_on.entry((ci, b)).or_insert(true) &= on_backend[&b];
            }
        }

        // Each (backend, features) combination is validated, specialized and written once, for
        // all the claims that use the configuration with it.
        let mut groups: Vec<(Backend, wgpu::Features, Vec<&str>)> = Vec::new();
        for u in &c.users {
            let needs = claims[u.claim].needs;
            let name = claims[u.claim].name.as_str();
            match groups
                .iter_mut()
                .find(|(b, f, _)| *b == u.backend && *f == needs)
            {
                Some(g) => g.2.push(name),
                None => groups.push((u.backend, needs, vec![name])),
            }
        }
        for (b, needs, names) in groups {
            let who = format!("{} on {}", names.join(", "), b.name());
            let info = match validate(module, naga_caps(needs, b)) {
                Ok(i) => i,
                Err(e) => {
                    failures.push(format!(
                        "{} ({who}): does not validate with the declared needs [{}]: {e}",
                        c.label(),
                        feature_names(needs)
                    ));
                    continue;
                }
            };
            let (m, i) = match naga::back::pipeline_constants::process_overrides(
                module,
                &info,
                Some((ShaderStage::Compute, c.entry)),
                &constants,
            ) {
                Ok(x) => x,
                Err(e) => {
                    failures.push(format!("{} ({who}): overrides: {e}", c.label()));
                    continue;
                }
            };
            // The plan builder accepted this kernel for an adapter with `min_storage` bytes of
            // workgroup storage: its arrays (as WebGPU counts them) must fit, or pipeline
            // creation would fail there instead of the variant being refused with a reason.
            let used =
                attn_wgpu::kernels::workgroup_bytes_of(&m, &i, c.entry).expect("entry point");
            if used > c.min_storage as u64 {
                failures.push(format!(
                    "{} ({who}): uses {used} bytes of workgroup storage but its plan was accepted \
                     for an adapter with {}",
                    c.label(),
                    c.min_storage
                ));
            }
            // Cooperative matrices load and store 16-byte rows: a kernel that uses them keeps every
            // workgroup array a whole number of 16-byte units, so that, laid out one after the
            // other, each starts 16-byte aligned. (Suspected, not proven, cause of a failed
            // experiment: the forward with a 2-byte `sl` array gave NaNs on the H200, v34's F.)
            if c.source.contains("enable wgpu_cooperative_matrix;") {
                let mut layouter = naga::proc::Layouter::default();
                layouter.update(m.to_ctx()).expect("layout");
                for (_, g) in m.global_variables.iter() {
                    let size = layouter[g.ty].size;
                    if g.space == naga::AddressSpace::WorkGroup && size % 16 != 0 {
                        failures.push(format!(
                            "{} ({who}): workgroup array `{}` is {size} bytes, not a multiple of 16",
                            c.label(),
                            g.name.as_deref().unwrap_or("?")
                        ));
                    }
                }
            }
            // What the result files report is what the kernel declares.
            if c.declared_storage.iter().any(|&x| x != used) {
                failures.push(format!(
                    "{} ({who}): uses {used} bytes of workgroup storage, its plans report {:?}",
                    c.label(),
                    c.declared_storage
                ));
            }
            match write_for(b, &m, &i, c.entry, needs, &tools) {
                Ok(targets) => *written.entry(b).or_insert(0) += targets.len(),
                Err(e) => failures.push(format!("{} ({who}): {e}", c.label())),
            }
        }
    }

    for (ci, c) in claims.iter().enumerate() {
        // Every declared feature is needed by some shader of the claim: a variant's static
        // `needs`, and SHADER_F16 for f16 where it stores f16 as WGSL `f16`.
        let got = needed.get(&ci).copied().unwrap_or(wgpu::Features::empty());
        let unused = c.needs - got;
        if !unused.is_empty() {
            failures.push(format!(
                "`{}` declares {} but none of its shaders needs it",
                c.name,
                feature_names(unused)
            ));
        }
        // A backend left out for lack of a feature: its shaders must really need that feature.
        for b in Backend::ALL {
            let claimed = c.backends().contains(&b);
            let excluded_by_hand = c.excludes.iter().any(|(x, _)| *x == b);
            if !claimed && !excluded_by_hand {
                if let Some(true) = validates_on.get(&(ci, b)) {
                    failures.push(format!(
                        "`{}` is not claimed on {} ({}), yet all its shaders validate there",
                        c.name,
                        b.name(),
                        c.unsupported_on(b).unwrap_or_default()
                    ));
                }
            }
        }
    }

    eprintln!(
        "translate: {} distinct configurations from {} plans; modules written per backend: {}; \
         spirv-val {}, glslangValidator {}; {:.1} s",
        configs.len(),
        plans.values().sum::<usize>(),
        written
            .iter()
            .map(|(b, n)| format!("{} {n}", b.name()))
            .collect::<Vec<_>>()
            .join(", "),
        if tools.spirv_val { "run" } else { "SKIPPED" },
        if tools.glslang { "run" } else { "SKIPPED" },
        t0.elapsed().as_secs_f64()
    );
    for c in &configs {
        let users: Vec<String> = c
            .users
            .iter()
            .map(|u| format!("{}@{}", claims[u.claim].name, u.backend.name()))
            .collect();
        eprintln!("  {}  <- {}", c.label(), users.join(" "));
    }
    for c in &claims {
        for b in Backend::ALL {
            if let Some(why) = c.unsupported_on(b) {
                eprintln!("  not claimed: {why}");
            }
        }
    }
    for b in Backend::ALL {
        assert!(
            written.get(&b).copied().unwrap_or(0) > 0
                || failures.iter().any(|f| f.contains(b.name())),
            "no module was written for {} at all: does any variant claim it?",
            b.name()
        );
    }
    assert!(
        failures.is_empty(),
        "{} translation failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Every file in shaders/ ends up in at least one translated module (a variant's plan or a probe
/// kernel's), so none escapes translation. A file counts as used when a module is named after it
/// (`a.wgsl`, or `a.wgsl+b.wgsl` for composed ones), or when its text appears in a module's source
/// (preludes), allowing a couple of lines to differ (templated preludes whose placeholders are
/// filled in).
#[test]
fn every_shader_file_is_used_by_a_plan() {
    let configs = collect().configs;
    let names: BTreeSet<&str> = configs.iter().flat_map(|c| c.file.split('+')).collect();
    let sources: BTreeSet<&'static str> = configs.iter().map(|c| c.source).collect();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/shaders");
    let mut unused = Vec::new();
    let mut files = 0;
    for entry in std::fs::read_dir(dir).expect("shaders/") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("wgsl") {
            continue;
        }
        files += 1;
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if names.contains(name.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read shader");
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let used = sources.iter().any(|s| {
            if s.contains(text.as_str()) {
                return true;
            }
            let src_lines: BTreeSet<&str> = s.lines().map(str::trim).collect();
            let missing = lines.iter().filter(|l| !src_lines.contains(*l)).count();
            missing <= 2 && lines.len() > 2 * missing
        });
        if !used {
            unused.push(name);
        }
    }
    assert!(files > 0, "no .wgsl files found in {dir}");
    assert!(
        unused.is_empty(),
        "shaders/ files used by no plan of any variant or probe (so never translated or run): {}",
        unused.join(", ")
    );
}

/// The plan's declared access of every binding (which the runner turns into the explicit
/// bind-group layout) against naga's reflection of the WGSL entry point it dispatches: the
/// storage buffers the entry point uses are exactly bindings 1..=n of the dispatch, each declared
/// `read` in WGSL where the plan says `Read` and `read_write` where it says `ReadWrite`, and a
/// `Read` binding is never written. Every plan of every variant over `problems()` x every
/// backend's capabilities is checked (each distinct module + entry + bindings once).
#[test]
fn declared_binding_access_matches_the_shaders() {
    use attn_wgpu::plan::Access;
    use naga::valid::GlobalUse;
    let mut seen: BTreeSet<(usize, &'static str, Vec<String>)> = BTreeSet::new();
    let mut modules: BTreeMap<usize, (naga::Module, ModuleInfo)> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut checked = 0usize;
    let problems = problems();
    for b in Backend::ALL {
        for caps in caps_for(b) {
            for p in &problems {
                for v in VARIANTS {
                    let Ok(plan) = variants::plan(v.name, p, &caps) else {
                        continue;
                    };
                    for d in &plan.dispatches {
                        let sig: Vec<String> = d
                            .bindings
                            .iter()
                            .map(|x| format!("{:?}", x.access))
                            .collect();
                        let src = d.shader.source.as_ptr() as usize;
                        if !seen.insert((src, d.entry, sig)) {
                            continue;
                        }
                        checked += 1;
                        let (module, info) = modules.entry(src).or_insert_with(|| {
                            let m = naga::front::wgsl::parse_str(d.shader.source)
                                .unwrap_or_else(|e| panic!("{}: {e}", d.shader.label()));
                            let i = validate(&m, Capabilities::all())
                                .unwrap_or_else(|e| panic!("{}: {e}", d.shader.label()));
                            (m, i)
                        });
                        let ep = module
                            .entry_points
                            .iter()
                            .position(|e| e.name == d.entry)
                            .unwrap_or_else(|| {
                                panic!("{}: no entry `{}`", d.shader.label(), d.entry)
                            });
                        let uses = info.get_entry_point(ep);
                        let mut used: BTreeMap<u32, (naga::StorageAccess, GlobalUse)> =
                            BTreeMap::new();
                        for (h, g) in module.global_variables.iter() {
                            let (Some(rb), naga::AddressSpace::Storage { access }) =
                                (&g.binding, g.space)
                            else {
                                continue;
                            };
                            if !uses[h].is_empty() {
                                assert_eq!(rb.group, 0, "{}", d.shader.label());
                                used.insert(rb.binding, (access, uses[h]));
                            }
                        }
                        let what = format!(
                            "{} `{}` in {}:{} (plan bindings {:?})",
                            plan.variant,
                            d.name,
                            d.shader.label(),
                            d.entry,
                            d.bindings
                                .iter()
                                .map(|x| format!("{} {:?}", x.buffer, x.access))
                                .collect::<Vec<_>>()
                        );
                        let numbers: Vec<u32> = used.keys().copied().collect();
                        let expect: Vec<u32> = (1..=d.bindings.len() as u32).collect();
                        if numbers != expect {
                            failures.push(format!(
                                "{what}: the entry point uses storage bindings {numbers:?}, the plan declares {expect:?}"
                            ));
                            continue;
                        }
                        for (i, decl) in d.bindings.iter().enumerate() {
                            let (access, use_) = used[&(i as u32 + 1)];
                            let wgsl_rw = access.contains(naga::StorageAccess::STORE);
                            let plan_rw = decl.access == Access::ReadWrite;
                            if wgsl_rw != plan_rw {
                                failures.push(format!(
                                    "{what}: binding {} (`{}`) is {} in WGSL but {:?} in the plan",
                                    i + 1,
                                    decl.buffer,
                                    if wgsl_rw { "read_write" } else { "read" },
                                    decl.access
                                ));
                            }
                            if !plan_rw && use_.contains(GlobalUse::WRITE) {
                                failures.push(format!(
                                    "{what}: binding {} (`{}`) is declared Read but written",
                                    i + 1,
                                    decl.buffer
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} dispatch configurations checked"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("{checked} dispatch configurations: declared access matches the shaders");
}

/// Shader composition takes any number of part files: the register-tiled kernel is five files
/// (the kernel, its row reductions, the shared score masking, the logsumexp hook, the shared
/// stores), and the masking and stores it uses are the shared ones, defined once in the
/// composed source.
#[test]
fn composition_appends_several_parts() {
    let mut caps = AdapterCaps::webgpu_defaults();
    caps.max_workgroup_storage = 32 << 10; // room for the register-tiled kernel
    let p = Problem::new(1, 2, 64, 64, true, 0);
    let plan = variants::plan("tiled", &p, &caps).unwrap();
    let s = &plan.dispatches[0].shader;
    assert_eq!(
        s.file,
        "tiled_rt.wgsl+tiled_rt_wg.wgsl+tiled_mask.wgsl+tiled_nolse.wgsl+tiled_store.wgsl"
    );
    assert_eq!(s.source.matches("fn masked(").count(), 1, "{}", s.file);
    assert_eq!(s.source.matches("fn store_vec(").count(), 1, "{}", s.file);
    assert_eq!(s.source.matches("fn max4(").count(), 1, "{}", s.file);
    assert_eq!(s.source.matches("fn row_max(").count(), 1, "{}", s.file);
    assert!(
        !s.source.contains("fn mask_row("),
        "the old private copy is gone"
    );
}
