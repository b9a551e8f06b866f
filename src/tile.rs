//! Tile types of the fused `tiled` kernels: what `tune` searches, `--tile` forces, a [`Problem`]
//! may carry and a [`Plan`] records. A leaf module: it depends on nothing else in the crate, so
//! `problem`, `plan` and `variants` can all use it without an import cycle.
//!
//! [`Problem`]: crate::problem::Problem
//! [`Plan`]: crate::plan::Plan

/// Workgroup storage that tiled_rt_wg.wgsl adds to tiled_rt.wgsl's (absent with subgroup reductions;
/// [`TileConfig::storage_bytes`] gives the whole for any D).
pub const RT_PART_STORAGE: u64 = 1024;

/// Workgroup storage of tiled_v2.wgsl without its K/V tiles (the transposed Q tile, 64 x 64 f32);
/// K and V add BC · 512 bytes.
pub const RT2_Q_STORAGE: u64 = 16384;

/// Workgroup storage of tiled_v3.wgsl at every D: one 64-column chunk of Q (64 rows), K and V
/// (32 keys each), f32.
pub const RT3_STORAGE: u64 = 32768;

/// Pipeline constants that the tile configuration or the shape owns (they size workgroup storage,
/// the grid or the kernel's loops, so the host's figures depend on them): `--override` refuses
/// them in favour of `--tile` (or `--head-dim` for tiled_coop.wgsl's `D16`).
pub const TILE_OWNED: &[&str] = &["BR", "BC", "D4", "DP", "RPT", "D16"];

/// A pipeline constant that `--override` may set: a knob of a kernel's method (not of its
/// storage, grid or shape), with the values the kernel is written for.
pub struct Knob {
    pub name: &'static str,
    /// The allowed values, or (with `range`) the two ends of an interval.
    pub values: &'static [f64],
    pub range: bool,
    pub what: &'static str,
}

/// Every constant `--override` may set. The others are the tile's ([`TILE_OWNED`]: `--tile`) or
/// follow from the shape and the grid (HD = D, split-kv's lane layout, mask rows): setting them
/// by hand breaks the kernel, so they are refused when the option is parsed.
pub const KNOBS: &[Knob] = &[
    Knob {
        name: "LO",
        values: &[0.0, 2.0],
        range: false,
        what: "tiled-coop: P into P·V as one f16 (0) or hi + lo f16 parts (2)",
    },
    Knob {
        name: "TAU",
        values: &[0.0, 64.0],
        range: true,
        what:
            "tiled (rt2, rt3) / tiled-coop: rescale when a row's maximum grows by more than 2^TAU",
    },
    Knob {
        name: "PREFETCH",
        values: &[0.0, 1.0],
        range: false,
        what: "tiled / tiled-coop: load the next K/V block into registers (1) or not (0)",
    },
];

/// `--override NAME=VALUE`, parsed and checked against [`KNOBS`]: the knob and its value, or the
/// message (naming the text, and what is allowed).
pub fn parse_override(s: &str) -> Result<(String, f64), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("--override `{s}`: expected NAME=VALUE, e.g. LO=0"))?;
    let k = k.trim();
    if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("--override `{s}`: `{k}` is not a constant's name"));
    }
    match v.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => {
            check_knob(k, x).map_err(|why| format!("--override `{s}`: {why}"))?;
            Ok((k.to_string(), x))
        }
        _ => Err(format!("--override `{s}`: `{v}` is not a finite number")),
    }
}

/// `--override NAME=VALUE` checked against [`KNOBS`]: the reason a name or value is refused,
/// naming what is allowed.
pub fn check_knob(name: &str, value: f64) -> Result<(), String> {
    let Some(k) = KNOBS.iter().find(|k| k.name == name) else {
        let knobs: Vec<&str> = KNOBS.iter().map(|k| k.name).collect();
        let why = if TILE_OWNED.contains(&name) {
            "it is part of the tile configuration: choose it with --tile".to_string()
        } else if name == "HD" || name == "D16" {
            "it is the head dimension: set it with --head-dim".to_string()
        } else {
            "it is not a knob (the plan sets it from the shape and the grid)".to_string()
        };
        return Err(format!(
            "`{name}` cannot be set: {why}; the knobs are {}",
            knobs.join(", ")
        ));
    };
    let show = |v: &f64| format!("{v}");
    let ok = if k.range {
        (k.values[0]..=k.values[1]).contains(&value)
    } else {
        k.values.contains(&value)
    };
    if ok {
        return Ok(());
    }
    let allowed = if k.range {
        format!("{} to {}", show(&k.values[0]), show(&k.values[1]))
    } else {
        k.values.iter().map(show).collect::<Vec<_>>().join(" or ")
    };
    Err(format!(
        "{name} = {value} is out of range: {name} ({}) takes {allowed}",
        k.what
    ))
}

/// Which fused kernel a tile configuration runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TileKernel {
    /// tiled_v2.wgsl: 128 threads, 64 rows, key blocks of BC, P exchanged by subgroup shuffles.
    Rt2,
    /// tiled_v3.wgsl: tiled_v2's layout for D = 72 .. 256, the head dimension walked in chunks
    /// of 64 columns (32 KiB of workgroup storage at every D), key blocks of 32.
    Rt3,
    /// tiled_rt.wgsl: 64 threads, 64 rows (32 for D <= 128, 16 for D <= 256), key blocks of 16
    /// (8 or 4 where storage is short).
    Rt,
    /// tiled.wgsl: one query row per thread, BR rows.
    Row,
    /// tiled_coop.wgsl / tiled_coop_rt2.wgsl: cooperative matrices, 64 or 128 rows, key blocks
    /// of 16.
    Coop,
    /// tiled_coop_vk.comp (SPIR-V, Vulkan): cooperative matrices with the softmax in registers,
    /// 64 or 128 rows (its ROWS), key blocks of BC (16 to 64 by head dimension and ROWS).
    CoopVk,
    /// tiled_cm2.comp (SPIR-V, Vulkan, VK_NV_cooperative_matrix2): workgroup-scope matrices, BR
    /// rows, key blocks of BC; the driver stages them in workgroup memory of its own.
    Cm2,
}

/// Workgroup storage of the cooperative-matrix kernel at D = 64 (tiled_coop_rt2.wgsl; its header
/// comment derives it; [`TileConfig::storage_bytes`] for any D).
pub const COOP_STORAGE: u64 = 20992;

/// Tile configuration of the fused kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileConfig {
    pub kernel: TileKernel,
    pub br: u32,
    pub bc: u32,
    pub d4: u32,
    pub dp: u32,
}

impl TileConfig {
    /// Workgroup storage in bytes of the kernel; for one row per thread: qs + os (BR rows) + ks +
    /// vs (BC rows), DP vec4 each, + inv_l.
    pub const fn storage_bytes(&self) -> u64 {
        match self.kernel {
            TileKernel::Rt2 => RT2_Q_STORAGE + self.bc as u64 * 512,
            TileKernel::Rt3 => RT3_STORAGE,
            TileKernel::Rt => {
                (self.br as u64 + 2 * self.bc as u64) * self.dp as u64 * 16
                    + self.bc as u64 * 256
                    + RT_PART_STORAGE
            }
            TileKernel::Coop => {
                let (d, bc) = (4 * self.d4 as u64, self.bc as u64);
                // K and V staged, P hi and lo (BR rows x BC keys each), the subgroups' sf.
                2 * bc * (d + 8) * 2 + 2 * self.br as u64 * bc * 2 + 4 * 512 * 4
            }
            // K and V staged; S and P stay in registers.
            TileKernel::CoopVk => 2 * self.bc as u64 * (4 * self.d4 as u64 + 8) * 2,
            // None declared: the driver holds workgroup-scope matrices as it chooses.
            TileKernel::Cm2 => 0,
            TileKernel::Row => {
                (2 * self.br as u64 + 2 * self.bc as u64) * self.dp as u64 * 16 + 4 * self.br as u64
            }
        }
    }

    /// The register-tiled kernels (tiled_v2.wgsl, tiled_v3.wgsl, tiled_rt.wgsl), as against one
    /// row per thread (tiled.wgsl) or the cooperative-matrix kernel.
    pub fn register_tiled(&self) -> bool {
        matches!(
            self.kernel,
            TileKernel::Rt2 | TileKernel::Rt3 | TileKernel::Rt
        )
    }
}

/// Which kernel (and BR) the `tiled` variant runs: what `tune` searches and `--tile` forces.
/// Written `rt2:BC` (the register-tiled v2 kernel, P exchanged by subgroup shuffles, key blocks
/// of BC = 32 or 64; `rt2` alone is `rt2:32`), `rt3` (its layout for D = 72 .. 256, the head
/// dimension walked in chunks of 64), `rt` (the first register-tiled kernel) or `row:BR` (one row
/// per thread, BR rows a workgroup).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TileChoice {
    /// rt2 with key blocks of this many keys (32 or 64).
    Subgroup(u32),
    /// rt3: tiled_v3.wgsl, D = 72 .. 256 in chunks of 64 columns.
    Chunked,
    RegisterTiled,
    Row(u32),
}

impl TileChoice {
    /// Parses `rt` or `row:BR` (BR a positive integer; whether it fits is the builder's question).
    pub fn parse(s: &str) -> Result<TileChoice, String> {
        let t = s.trim();
        if t == "rt" {
            return Ok(TileChoice::RegisterTiled);
        }
        if t == "rt2" {
            return Ok(TileChoice::Subgroup(32));
        }
        if t == "rt3" {
            return Ok(TileChoice::Chunked);
        }
        if let Some(bc) = t.strip_prefix("rt2:") {
            return match bc.trim() {
                "32" => Ok(TileChoice::Subgroup(32)),
                "64" => Ok(TileChoice::Subgroup(64)),
                other => Err(format!(
                    "--tile `{s}`: rt2's key block BC must be 32 or 64 (got `{other}`)"
                )),
            };
        }
        if let Some(br) = t.strip_prefix("row:") {
            return match br.trim().parse::<u32>() {
                Ok(0) => Err(format!("--tile `{s}`: BR must be at least 1")),
                Ok(n) => Ok(TileChoice::Row(n)),
                Err(_) => Err(format!("--tile `{s}`: `{br}` is not a positive integer")),
            };
        }
        Err(format!(
            "--tile `{s}` is unknown (expected `rt2` or `rt2:64`, the register-tiled v2 kernel, \
             `rt3`, its layout for D = 72 .. 256, `rt`, the first register-tiled kernel, or \
             `row:BR`, e.g. `row:32`)"
        ))
    }
}

impl std::fmt::Display for TileChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TileChoice::Subgroup(bc) => write!(f, "rt2:{bc}"),
            TileChoice::Chunked => write!(f, "rt3"),
            TileChoice::RegisterTiled => write!(f, "rt"),
            TileChoice::Row(br) => write!(f, "row:{br}"),
        }
    }
}

impl serde::Serialize for TileChoice {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> serde::Deserialize<'de> for TileChoice {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        TileChoice::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A tile choice imposed on the `tiled` variant, and where it came from (`--tile`,
/// `tuned: <cache path>`, `tune candidate`). Carried in [`Problem::tile`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TileRequest {
    pub choice: TileChoice,
    pub source: String,
}

/// The tile choice a plan used and why: [`TileRequest::source`], or `default` (the builder's own
/// preference, [`choose`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TileUsed {
    pub choice: TileChoice,
    pub source: String,
}
