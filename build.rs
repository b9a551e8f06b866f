// Records the git commit the binary was built from (for result files), when git knows it, and
// compiles the GLSL kernels (shaders/*.comp) to SPIR-V in OUT_DIR, where src/kernels embeds them
// with include_bytes!. Those kernels run through wgpu's PASSTHROUGH_SHADERS on Vulkan only
// (src/kernels/tiled_coop_vk.rs); a compile error fails the build with glslang's log.
use std::process::Command;

// The builds per head dimension of the forward and the backward, shared with
// src/kernels/tiled_coop_vk.rs.
#[allow(dead_code)]
mod shapes {
    include!("src/kernels/tiled_coop_vk_shapes.rs");
}
use shapes::{
    gemm_module, layout_probe_module, probe_coop_module, BACKWARD_DEVICE, BACKWARD_EMULATED,
    CM2_BWD_DEVICE, CM2_DEVICE, FORWARD_DEVICE, FORWARD_EMULATED, GEMM_HEAD_DIMS,
};

/// A GLSL kernel to compile: source under shaders/, module name (OUT_DIR/name.spv), `#define`s.
struct Glsl {
    file: &'static str,
    name: String,
    defines: Vec<(&'static str, String)>,
}

/// Every SPIR-V module, each kernel in two builds: on the device's cooperative matrices, and on
/// shaders/coopmat_emu.glsl (EMULATE_COOPMAT = 1, name suffix `_emu`), which the tests run on
/// lavapipe (src/kernels/tiled_coop_vk.rs, `Build::Emulated`).
/// - tiled_coop_vk.comp `tiled_coop_vk[_bf16]_d{D}_b{BC}[_np]_r{ROWS}[_lse][_mask][_drop]`: bf16
///   storage (BF16) or f16, the head dimension, key block and prefetch of each build
///   (src/kernels/tiled_coop_vk_shapes.rs), one or two 16-row tiles a subgroup (ROWS), training
///   (LSE: also writes L), a mask bias (MASK, bound after the plan's other buffers: binding 5, or
///   6 with L), dropout (DROPOUT);
/// - tiled_coop_vk_bwd.comp
///   `tiled_coop_vk_bwd[_bf16]_d{D}_b{BLOCK}[_np][_s{SPLIT}][_nh]_{kv,q}[_mask][_drop]`: the
///   backward passes (bf16 or f16) at each head dimension, the gradients' columns in SPLIT parts,
///   the A matrices held or not (HOLD) (the mask at binding 9 for bwd_kv, 8 for bwd_q);
/// - gemm_coop_vk.comp `gemm_coop_vk[_bf16]_{qk,pv}_d{64,128,256}`: `unfused-coop`'s S = Q·Kᵀ
///   and O = P·V (bf16 or f16) at three head dimensions (HEAD_D);
/// - tiled_cm2.comp `tiled_cm2[_bf16]_d{D}_r{BR}_b{BC}_w{WG}[_rr][_lse][_mask][_drop]`: the forward on
///   VK_NV_cooperative_matrix2 (src/kernels/tiled_coop_vk_shapes.rs, CM2_DEVICE), device only;
/// - tiled_cm2_bwd.comp `tiled_cm2_bwd[_bf16]_d{D}_q{BQ}_k{BK}_{kv,q}[_mask][_drop]`: its backward
///   passes (CM2_BWD_DEVICE), device only;
/// - probe_coop.comp `probe_coop[_bf16]`: `probe`'s f16 and bf16 matrix-unit peaks;
/// - coop_layout_probe.comp `coop_layout_probe`, and on the device `coop_layout_probe_bf16`.
fn flag(on: bool, name: &'static str) -> &'static str {
    if on {
        name
    } else {
        ""
    }
}

/// The name suffix of a module's mask and dropout options (src/kernels/tiled_coop_vk.rs
/// `options` spells it the same way).
fn options(mask: bool, dropout: bool) -> String {
    format!("{}{}", flag(mask, "_mask"), flag(dropout, "_drop"))
}

fn modules() -> Vec<Glsl> {
    let mut all = Vec::new();
    for emu in [false, true] {
        let tail = if emu { "_emu" } else { "" };
        let base = |file, name: String, mut defines: Vec<(&'static str, String)>| {
            defines.push(("EMULATE_COOPMAT", (emu as u8).to_string()));
            Glsl {
                file,
                name: format!("{name}{tail}"),
                defines,
            }
        };
        let opts = [(false, false), (true, false), (false, true), (true, true)];
        let shapes: &[shapes::ForwardShape] = if emu {
            &FORWARD_EMULATED
        } else {
            &FORWARD_DEVICE
        };
        for shape in shapes {
            let rows = shape.rows;
            for (bf16, lse) in [(false, false), (false, true), (true, false), (true, true)] {
                if lse && !shape.training {
                    continue;
                }
                for (mask, drop) in opts {
                    let name = shape.module(bf16, lse, &options(mask, drop));
                    let defines = vec![
                        ("BF16", (bf16 as u8).to_string()),
                        ("HEAD_D", shape.d.to_string()),
                        ("BC", shape.bc.to_string()),
                        ("PREFETCH", (shape.prefetch as u8).to_string()),
                        ("ROWS", rows.to_string()),
                        ("WG", shape.invocations().to_string()),
                        ("QS", (shape.stage_q as u8).to_string()),
                        ("TAU", format!("{}.0", shape.tau())),
                        ("LSE", (lse as u8).to_string()),
                        ("MASK", (mask as u8).to_string()),
                        ("MASK_BINDING", (5 + lse as u8).to_string()),
                        ("DROPOUT", (drop as u8).to_string()),
                    ];
                    all.push(base("tiled_coop_vk.comp", name, defines));
                }
            }
        }
        let bwd_shapes = if emu {
            &BACKWARD_EMULATED
        } else {
            &BACKWARD_DEVICE
        };
        for shape in bwd_shapes {
            for (bf16, kv) in [(false, true), (false, false), (true, true), (true, false)] {
                for (mask, drop) in opts {
                    let name = shape.module(bf16, kv, &options(mask, drop));
                    let defines = vec![
                        ("BF16", (bf16 as u8).to_string()),
                        ("KV", (kv as u8).to_string()),
                        ("HEAD_D", shape.d.to_string()),
                        ("BLOCK", shape.block.to_string()),
                        ("PREFETCH", (shape.prefetch as u8).to_string()),
                        ("SPLIT", shape.split.to_string()),
                        ("HOLD", (shape.hold as u8).to_string()),
                        ("MASK", (mask as u8).to_string()),
                        ("MASK_BINDING", (if kv { 9 } else { 8 }).to_string()),
                        ("DROPOUT", (drop as u8).to_string()),
                    ];
                    all.push(base("tiled_coop_vk_bwd.comp", name, defines));
                }
            }
        }
        for bf16 in [false, true] {
            for qk in [true, false] {
                for half in [false, true] {
                    for d in GEMM_HEAD_DIMS {
                        let name = gemm_module(bf16, qk, half, d);
                        let defines = vec![
                            ("BF16", (bf16 as u8).to_string()),
                            ("QK", (qk as u8).to_string()),
                            ("SH", (half as u8).to_string()),
                            ("HEAD_D", d.to_string()),
                        ];
                        all.push(base("gemm_coop_vk.comp", name, defines));
                    }
                }
            }
        }
        for bf16 in [false, true] {
            all.push(base(
                "probe_coop.comp",
                probe_coop_module(bf16),
                vec![("BF16", (bf16 as u8).to_string())],
            ));
        }
        all.push(base(
            "coop_layout_probe.comp",
            layout_probe_module(false),
            vec![],
        ));
        if !emu {
            // The forward on VK_NV_cooperative_matrix2 (no emulated build).
            for shape in &CM2_DEVICE {
                for (bf16, lse) in [(false, false), (false, true), (true, false), (true, true)] {
                    for (mask, drop) in opts {
                        all.push(Glsl {
                            file: "tiled_cm2.comp",
                            name: shape.module(bf16, lse, &options(mask, drop)),
                            defines: vec![
                                ("BF16", (bf16 as u8).to_string()),
                                ("HEAD_D", shape.d.to_string()),
                                ("BR", shape.br.to_string()),
                                ("BC", shape.bc.to_string()),
                                ("WG_SIZE", shape.wg.to_string()),
                                ("ROWSUM_MMA", (shape.rowsum_mma as u8).to_string()),
                                ("LSE", (lse as u8).to_string()),
                                ("MASK", (mask as u8).to_string()),
                                ("MASK_BINDING", (5 + lse as u8).to_string()),
                                ("DROPOUT", (drop as u8).to_string()),
                            ],
                        });
                    }
                }
            }
            for shape in &CM2_BWD_DEVICE {
                for (bf16, kv) in [(false, true), (false, false), (true, true), (true, false)] {
                    for (mask, drop) in opts {
                        all.push(Glsl {
                            file: "tiled_cm2_bwd.comp",
                            name: shape.module(bf16, kv, &options(mask, drop)),
                            defines: vec![
                                ("BF16", (bf16 as u8).to_string()),
                                ("KV", (kv as u8).to_string()),
                                ("HEAD_D", shape.d.to_string()),
                                ("BQ", shape.bq.to_string()),
                                ("BK", shape.bk.to_string()),
                                ("MASK", (mask as u8).to_string()),
                                ("MASK_BINDING", (if kv { 9 } else { 8 }).to_string()),
                                ("DROPOUT", (drop as u8).to_string()),
                            ],
                        });
                    }
                }
            }
            // The bf16 A operand's layout (the device's bf16 builds assume the f16 one's).
            all.push(base(
                "coop_layout_probe.comp",
                layout_probe_module(true),
                vec![("BF16", "1".into())],
            ));
        }
    }
    all
}

/// `#include "name"` resolves to shaders/name (the one include: coopmat_emu.glsl).
struct Includes;

impl glslang::include::IncludeHandler for Includes {
    fn include(
        &mut self,
        _ty: glslang::include::IncludeType,
        name: &str,
        _includer: &str,
        _depth: usize,
    ) -> Option<glslang::include::IncludeResult> {
        let path = format!("shaders/{name}");
        println!("cargo:rerun-if-changed={path}");
        let data = std::fs::read_to_string(&path).ok()?;
        Some(glslang::include::IncludeResult { name: path, data })
    }
}

fn compile_glsl(out_dir: &std::path::Path) {
    use glslang::*;
    let compiler = Compiler::acquire().expect("glslang: acquiring the compiler");
    let modules = modules();
    for Glsl {
        file,
        name,
        defines,
    } in &modules
    {
        let path = format!("shaders/{file}");
        println!("cargo:rerun-if-changed={path}");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let source = ShaderSource::from(text);
        let options = CompilerOptions {
            source_language: SourceLanguage::GLSL,
            target: Target::Vulkan {
                version: VulkanVersion::Vulkan1_3,
                spirv_version: SpirvVersion::SPIRV1_6,
            },
            messages: ShaderMessage::DEFAULT,
            version_profile: None,
        };
        let defs: Vec<(&str, Option<&str>)> = defines
            .iter()
            .map(|(k, v)| (*k, Some(v.as_str())))
            .collect();
        let mut includes = Includes;
        let input = ShaderInput::new(
            &source,
            ShaderStage::Compute,
            &options,
            Some(&defs),
            Some(&mut includes),
        )
        .unwrap_or_else(|e| panic!("{path}: {e}"));
        let shader = Shader::new(compiler, input)
            .parse()
            .unwrap_or_else(|e| panic!("{path} {defines:?}: {e}"));
        let mut program = Program::new(compiler);
        program.add_shader(&shader);
        let words = program
            .compile(ShaderStage::Compute)
            .unwrap_or_else(|e| panic!("{path} {defines:?}: {e}"));
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        std::fs::write(out_dir.join(format!("{name}.spv")), bytes)
            .expect("writing SPIR-V to OUT_DIR");
    }
    // The table src/kernels/tiled_coop_vk.rs includes: every module by name.
    let mut table = String::from(
        "/// Every SPIR-V module build.rs compiled, by name (build.rs `modules`).\n\
         pub(crate) const SPIRV_MODULES: &[(&str, &[u8])] = &[\n",
    );
    for m in &modules {
        table.push_str(&format!(
            "    (\"{0}\", include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{0}.spv\"))),\n",
            m.name
        ));
    }
    table.push_str("];\n");
    std::fs::write(out_dir.join("spirv_modules.rs"), table).expect("writing the module table");
}

fn main() {
    let out = Command::new("git").args(["rev-parse", "HEAD"]).output();
    let mut commit = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => String::new(),
    };
    if !commit.is_empty() {
        let dirty = Command::new("git")
            .args(["status", "--porcelain", "--untracked-files=no"])
            .output()
            .map(|o| !o.stdout.is_empty())
            .unwrap_or(false);
        if dirty {
            commit.push_str("-dirty");
        }
    }
    println!("cargo:rustc-env=ATTN_WGPU_GIT_COMMIT={commit}");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/index");
    println!("cargo:rerun-if-changed=src/kernels/tiled_coop_vk_shapes.rs");
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    compile_glsl(&out_dir);
}
