//! Bad input around dtypes, masks and .npy files: every case asserts the exit code and that the
//! message names the bad value (file, expected, actual), and that nothing panicked. Plus the
//! happy paths of npy in/out, --save-inputs and --variant auto.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use attn_wgpu::npy;
use attn_wgpu::problem::DType;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attn-wgpu"))
        .args(args)
        .env("XDG_RUNTIME_DIR", "/tmp")
        .output()
        .expect("spawn attn-wgpu")
}

fn expect_error(args: &[&str], code: i32, needles: &[&str]) {
    let o = run(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "args {args:?}\nstderr: {err}");
    for n in needles {
        assert!(err.contains(n), "args {args:?}: stderr lacks `{n}`:\n{err}");
    }
    assert!(!err.contains("panicked"), "args {args:?} panicked:\n{err}");
}

struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Self {
        Files {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn s(&self, name: &str) -> String {
        self.path(name).to_str().unwrap().to_string()
    }
    /// A float tensor of `shape` in `dtype` (values in [-1, 1)).
    fn tensor(&self, name: &str, shape: &[u64], dtype: DType) -> String {
        let len = shape.iter().product::<u64>() as usize;
        let vals: Vec<f32> = (0..len)
            .map(|i| ((i * 37 % 101) as f32) / 50.5 - 1.0)
            .collect();
        npy::write(&self.path(name), shape, dtype, &vals).unwrap();
        self.s(name)
    }
    fn bool_mask(&self, name: &str, shape: &[u64], f: impl Fn(usize) -> bool) -> String {
        let len = shape.iter().product::<u64>() as usize;
        let vals: Vec<bool> = (0..len).map(f).collect();
        npy::write_bool(&self.path(name), shape, &vals).unwrap();
        self.s(name)
    }
    fn raw(&self, name: &str, bytes: &[u8]) -> String {
        std::fs::write(self.path(name), bytes).unwrap();
        self.s(name)
    }
}

/// A minimal .npy header for `descr` and `shape` (for dtypes our writer does not produce).
fn npy_bytes(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    out.extend(data);
    out
}

const SMALL: [&str; 10] = [
    "run",
    "--batch",
    "1",
    "--heads",
    "2",
    "--seq",
    "8",
    "--head-dim",
    "4",
    "--reps",
];

fn small(extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = SMALL.iter().map(|s| s.to_string()).collect();
    v.push("1".into());
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn expect_small(extra: &[&str], code: i32, needles: &[&str]) {
    let args = small(extra);
    let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    expect_error(&refs, code, needles);
}

#[test]
fn bad_dtype_convention_and_padding() {
    expect_small(&["--dtype", "f64"], 2, &["--dtype `f64`", "bf16"]);
    expect_small(&["--dtype", "bf17"], 2, &["bf17"]);
    expect_small(
        &["--mask-convention", "torch"],
        2,
        &["torch", "sdpa", "mha"],
    );
    expect_small(&["--key-padding", "3,x"], 2, &["`x`", "--key-padding"]);
    expect_small(&["--key-padding", "-1"], 2, &["`-1`"]);
    expect_small(&["--key-padding", ""], 2, &["--key-padding"]);
    expect_small(&["--key-padding", "1,2"], 2, &["one per batch", "B=1"]);
    expect_small(&["--key-padding", "9"], 2, &["9 exceeds the 8 keys"]);
    expect_small(&["--variant", "flash9"], 2, &["flash9", "math"]);
    expect_small(
        &["--backend", "directx9", "--variant", "auto"],
        2,
        &["directx9"],
    );
    expect_small(&["--adapter", "no-such-gpu-xyz"], 1, &["no-such-gpu-xyz"]);
}

#[test]
fn bad_mask_files() {
    let f = Files::new();
    expect_small(
        &["--mask", "/nonexistent/m.npy"],
        2,
        &["/nonexistent/m.npy", "cannot open"],
    );
    let text = f.raw("text.npy", b"this is not numpy");
    expect_small(&["--mask", &text], 2, &["text.npy", "not a valid .npy"]);
    let good = f.bool_mask("good.npy", &[8, 8], |i| i % 3 != 0);
    let bytes = std::fs::read(&good).unwrap();
    let cut = f.raw("cut.npy", &bytes[..bytes.len() - 10]);
    expect_small(&["--mask", &cut], 2, &["cut.npy", "truncated"]);
    let empty = f.raw("empty.npy", b"");
    expect_small(&["--mask", &empty], 2, &["empty.npy", "not a valid"]);
    let wrong = f.bool_mask("wrong.npy", &[8, 9], |_| true);
    expect_small(
        &["--mask", &wrong],
        2,
        &["wrong.npy", "[8, 8]", "got [8, 9]"],
    );
    let three = f.bool_mask("three.npy", &[1, 8, 8], |_| true);
    expect_small(&["--mask", &three], 2, &["three.npy", "[1, 8, 8]"]);
    let heads = f.bool_mask("heads.npy", &[1, 3, 8, 8], |_| true);
    expect_small(
        &["--mask", &heads],
        2,
        &["heads.npy", "[1, 2, 8, 8]", "got [1, 3, 8, 8]"],
    );
    let batch = f.bool_mask("batch.npy", &[2, 1, 8, 8], |_| true);
    expect_small(&["--mask", &batch], 2, &["batch.npy", "got [2, 1, 8, 8]"]);
    let ints = f.raw("ints.npy", &npy_bytes("<i4", "(8, 8)", &[0u8; 256]));
    expect_small(
        &["--mask", &ints],
        2,
        &["ints.npy", "bool (|b1) or float32", "<i4"],
    );
    let f64m = f.raw("f64.npy", &npy_bytes("<f8", "(8, 8)", &[0u8; 512]));
    expect_small(&["--mask", &f64m], 2, &["f64.npy", "<f8"]);
    let mut nan = vec![0f32; 64];
    nan[5] = f32::NAN;
    npy::write(&f.path("nan.npy"), &[8, 8], DType::F32, &nan).unwrap();
    expect_small(
        &["--mask", &f.s("nan.npy")],
        2,
        &["nan.npy", "element 5 is NaN"],
    );
    let mut inf = vec![0f32; 64];
    inf[7] = f32::INFINITY;
    npy::write(&f.path("inf.npy"), &[8, 8], DType::F32, &inf).unwrap();
    expect_small(
        &["--mask", &f.s("inf.npy")],
        2,
        &["inf.npy", "+inf", "element 7"],
    );
    // A Fortran-ordered array: the header's flag set by hand.
    let fbytes = npy_bytes("|b1", "(8, 8)", &[1u8; 64]);
    let at = fbytes.windows(5).position(|w| w == b"False").unwrap();
    let mut fbytes = fbytes;
    fbytes[at..at + 5].copy_from_slice(b"True ");
    let fortran = f.raw("fortran.npy", &fbytes);
    expect_small(&["--mask", &fortran], 2, &["fortran.npy", "Fortran"]);
}

#[test]
fn bad_qkv_files() {
    let f = Files::new();
    let shape = [1u64, 2, 8, 4];
    let q = f.tensor("q.npy", &shape, DType::F32);
    let k = f.tensor("k.npy", &shape, DType::F32);
    let v = f.tensor("v.npy", &shape, DType::F32);
    let run_qkv = |q: &str, k: &str, v: &str, extra: &[&str], code: i32, needles: &[&str]| {
        let mut args = vec!["run", "--reps", "1", "--q", q, "--k", k, "--v", v];
        args.extend(extra);
        expect_error(&args, code, needles);
    };
    expect_error(&["run", "--q", &q], 2, &["--q, --k and --v go together"]);
    expect_error(&["run", "--q", &q, "--k", &k], 2, &["go together"]);
    let q3 = f.tensor("q3.npy", &[2, 8, 4], DType::F32);
    run_qkv(
        &q3,
        &k,
        &v,
        &[],
        2,
        &["q3.npy", "4-d [B, H, N, D]", "[2, 8, 4]"],
    );
    let qi = f.raw("qi.npy", &npy_bytes("<i4", "(1, 2, 8, 4)", &[0u8; 256]));
    run_qkv(
        &qi,
        &k,
        &v,
        &[],
        2,
        &["qi.npy", "float32 (<f4) or float16 (<f2)", "<i4"],
    );
    let kbad = f.tensor("kbad.npy", &[1, 2, 8, 5], DType::F32);
    run_qkv(
        &q,
        &kbad,
        &v,
        &[],
        2,
        &[
            "kbad.npy",
            "expected shape [B, Hkv, M, D] = [1, Hkv, M, 4]",
            "[1, 2, 8, 5]",
        ],
    );
    let vh = f.tensor("vh.npy", &shape, DType::F16);
    run_qkv(
        &q,
        &k,
        &vh,
        &[],
        2,
        &["vh.npy", "expected dtype f32", "got f16"],
    );
    let qz = f.tensor("qz.npy", &[1, 0, 8, 4], DType::F32);
    run_qkv(&qz, &k, &v, &[], 2, &["qz.npy", "zero size"]);
    let bytes = std::fs::read(&q).unwrap();
    let qcut = f.raw("qcut.npy", &bytes[..bytes.len() - 3]);
    run_qkv(&qcut, &k, &v, &[], 2, &["qcut.npy", "truncated"]);
    let mut corrupt = bytes.clone();
    corrupt[1] = b'X';
    let qc = f.raw("qc.npy", &corrupt);
    run_qkv(&qc, &k, &v, &[], 2, &["qc.npy", "not a valid .npy"]);
    run_qkv(
        &q,
        &k,
        &v,
        &["--seq", "16"],
        2,
        &["--seq 16 conflicts", "q.npy"],
    );
    let mut nanv = vec![0.5f32; 64];
    nanv[3] = f32::NAN;
    npy::write(&f.path("qn.npy"), &shape, DType::F32, &nanv).unwrap();
    run_qkv(
        &f.s("qn.npy"),
        &k,
        &v,
        &[],
        2,
        &["qn.npy", "element 3 is NaN"],
    );
    let big = f.tensor("big.npy", &[1, 1, 2, 300], DType::F32);
    run_qkv(&big, &big, &big, &[], 2, &["--head-dim 300"]);
    // A mask whose N does not match the files' N.
    let m = f.bool_mask("m.npy", &[9, 9], |_| true);
    run_qkv(&q, &k, &v, &["--mask", &m], 2, &["m.npy", "got [9, 9]"]);
}

#[test]
fn bad_output_paths_and_incompatible_choices() {
    let f = Files::new();
    expect_small(
        &["--out", "/nonexistent-dir-attn/o.npy"],
        2,
        &["--out", "/nonexistent-dir-attn"],
    );
    expect_small(
        &["--out", &f.s("o.npy"), "--variant", "all"],
        2,
        &["--out", "one variant"],
    );
    expect_small(&["--out", &f.s("")], 2, &["is a folder"]);
    // --save-inputs creates its folder (as --out-dir does); one that cannot be created (under a
    // regular file) is exit 2.
    let other = tempfile::tempdir().unwrap();
    let plain = other.path().join("plain");
    std::fs::write(&plain, b"x").unwrap();
    expect_small(
        &["--save-inputs", plain.join("sub").to_str().unwrap()],
        2,
        &["--save-inputs", "cannot create the folder"],
    );
    expect_small(&["--json", &f.s("")], 2, &["--json", "is a folder"]);
    // Forcing a variant the problem rules out: exit 4 with the same reason auto gives.
    expect_error(
        &[
            "run",
            "--seq",
            "8",
            "--reps",
            "1",
            "--variant",
            "tiled",
            "--dtype",
            "bf16",
            "--head-dim",
            "5",
        ],
        4,
        &["tiled", "D must be even (D=5)"],
    );
    expect_error(
        &[
            "run",
            "--variant",
            "unfused",
            "--heads",
            "1",
            "--seq",
            "8192",
            "--head-dim",
            "4",
            "--reps",
            "1",
        ],
        4,
        &["unfused", "one head's N x M"],
    );
    assert_eq!(
        std::fs::read_dir(f.dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

#[test]
fn npy_round_trip_save_inputs_and_auto() {
    let f = Files::new();
    let dir = f.dir.path();
    // 1. Generate, save the inputs (with a mask), write the output.
    let m = f.bool_mask("m.npy", &[8, 8], |i| i % 5 != 0);
    let out1 = f.s("o1.npy");
    let args = small(&[
        "--variant",
        "auto",
        "--dtype",
        "f16",
        "--mask",
        &m,
        "--mask-convention",
        "mha",
        "--key-padding",
        "6",
        "--save-inputs",
        dir.to_str().unwrap(),
        "--out",
        &out1,
        "--json",
        &f.s("r.json"),
    ]);
    let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let o = run(&refs);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("Auto     : picked"), "{stdout}");
    for name in ["q.npy", "k.npy", "v.npy", "mask.npy", "o1.npy"] {
        assert!(dir.join(name).is_file(), "{name}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("r.json")).unwrap()).unwrap();
    let picked = json["auto"]["picked"].as_str().unwrap().to_string();
    assert_eq!(
        json["auto"]["not_picked"].as_array().unwrap().len(),
        attn_wgpu::variants::names().len() - 1
    );
    assert_eq!(json["problem"]["mask"]["convention"], "mha");
    assert_eq!(json["dtype"], "f16");
    let o1 = npy::read_qkv(Path::new(&out1)).unwrap();
    assert_eq!((o1.shape.clone(), o1.dtype), (vec![1, 2, 8, 4], DType::F16));
    // 2. Feed the saved tensors back (dtype from the files, the saved additive mask as a float
    //    mask): same output bits, validation passes.
    let out2 = f.s("o2.npy");
    let o = run(&[
        "run",
        "--reps",
        "1",
        "--variant",
        &picked,
        "--q",
        &f.s("q.npy"),
        "--k",
        &f.s("k.npy"),
        "--v",
        &f.s("v.npy"),
        "--mask",
        &f.s("mask.npy"),
        "--out",
        &out2,
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.contains("f16") && stdout.contains("PASS"),
        "{stdout}"
    );
    let o2 = npy::read_qkv(Path::new(&out2)).unwrap();
    assert_eq!(o1.values.len(), o2.values.len());
    for (a, b) in o1.values.iter().zip(&o2.values) {
        assert!(a == b || (a.is_nan() && b.is_nan()), "{a} vs {b}");
    }
}

/// A mask saved by `--save-inputs` ([1, 1, N, N] for an [N, N] mask) is read back as `--mask` for
/// any B: a leading 1 broadcasts over the batch, as in PyTorch.
#[test]
fn saved_mask_round_trips_with_a_batch() {
    let f = Files::new();
    let m = f.bool_mask("m.npy", &[8, 8], |i| i % 5 != 0);
    let dir = f.s("saved");
    std::fs::create_dir(&dir).unwrap();
    let small = [
        "run",
        "--batch",
        "2",
        "--heads",
        "2",
        "--seq",
        "8",
        "--head-dim",
        "4",
        "--reps",
        "1",
        "--variant",
        "unfused-inplace",
    ];
    let first = run(&[&small[..], &["--mask", &m, "--save-inputs", &dir]].concat());
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let saved = f.path("saved").join("mask.npy");
    let again = run(&[&small[..], &["--mask", saved.to_str().unwrap()]].concat());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{err}");
    assert!(String::from_utf8_lossy(&again.stdout).contains("PASS"));
}
