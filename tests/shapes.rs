//! Nq != Nk (`--kv-seq M`) with both causal alignments on the test adapter: every variant passes
//! forward and backward against the f64 oracle for M < N and M > N, top-left, bottom-right and
//! non-causal (including bottom-right rows that see no key at all); the command line refuses to
//! guess the alignment and takes M from `--k`.

mod common;

use attn_wgpu::gpu::runner::{Runner, Schedule};
use attn_wgpu::problem::{CausalAlign, DType, Inputs, Problem};
use attn_wgpu::run::run_variant;
use attn_wgpu::validate::Verdict;
use attn_wgpu::{variants, Error};
use common::{bin, stderr};

const SCHED: Schedule = Schedule {
    warmup: 0,
    reps: 1,
    host_reps: 0,
    warmup_ms: None,
};

/// The refusals a variant may give for these shapes on the test adapter: a feature it lacks
/// (cooperative matrices), the in-place hazard in training, split-kv's decode-only regime.
fn shape_refusal(reason: &str) -> bool {
    reason.contains("does not offer")
        || reason.contains("in-place hazard")
        || reason.contains("decode kernel")
        || reason.contains("nothing to split")
}

#[test]
fn every_variant_passes_n_ne_m_in_both_alignments_forward_and_backward() {
    let gpu = common::gpu();
    let mut runner = Runner::new(gpu).unwrap();
    let mut ran = std::collections::BTreeMap::<&str, u32>::new();
    let mut fully_masked = 0u64;
    for (n, m) in [(24u32, 40u32), (40, 24), (1, 70)] {
        for (causal, align) in [
            (true, CausalAlign::TopLeft),
            (true, CausalAlign::BottomRight),
            (false, CausalAlign::TopLeft),
        ] {
            for backward in [false, true] {
                let mut p = Problem::new(1, 2, n, 16, causal, (n * 1000 + m) as u64);
                p.kv_seq = m;
                p.causal_align = align;
                p.backward = backward;
                p.dtype = if backward { DType::F32 } else { DType::BF16 };
                let x = Inputs::generate(&p);
                assert_eq!(x.k.len() as u64, p.kv_elems());
                for v in variants::names() {
                    let Some(r) = common::run_passing(&mut runner, &p, &x, v, shape_refusal) else {
                        continue;
                    };
                    fully_masked += r.validation.as_ref().unwrap().fully_masked_rows;
                    *ran.entry(v).or_default() += 1;
                }
            }
        }
    }
    // Bottom-right with M < N leaves the first N - M rows without a key.
    assert!(fully_masked > 0, "fully-masked rows must be exercised");
    for v in common::PORTABLE {
        assert!(ran.get(v).copied().unwrap_or(0) >= 9, "{v}: {ran:?}");
    }
}

/// Head dimensions past 64 (issue 14: D in {80, 128, 256}) on every variant the test adapter can
/// run, square causal, N != M in both alignments (bottom-right with GQA 8:2), and MQA decode:
/// forward PASS, and the training step where the variant has a backward (`tiled`'s fused backward
/// at every D: its small tiles on the test adapter). A refusal must name its limit (the adapter's
/// missing feature, the in-place hazard, the decode-only kernel); the
/// register-tiled `tiled` (tile `rt`) must run at every D.
#[test]
fn every_variant_passes_head_dims_80_128_256() {
    let gpu = common::gpu();
    let mut runner = Runner::new(gpu).unwrap();
    let mut ran = std::collections::BTreeMap::<(String, u32), u32>::new();
    for d in [80u32, 128, 256] {
        for (n, m, h, hkv, align, backward) in [
            (40u32, 40u32, 2u32, 2u32, CausalAlign::TopLeft, false),
            (24, 40, 8, 2, CausalAlign::BottomRight, false),
            (40, 24, 4, 4, CausalAlign::TopLeft, false),
            (40, 24, 2, 2, CausalAlign::BottomRight, true),
            (1, 96, 4, 1, CausalAlign::BottomRight, false),
        ] {
            let mut p = Problem::new(1, h, n, d, true, (d * 100 + n) as u64);
            p.kv_seq = m;
            p.kv_heads = hkv;
            p.causal_align = align;
            p.backward = backward;
            p.dtype = if d == 128 { DType::BF16 } else { DType::F32 };
            let x = Inputs::generate(&p);
            for v in variants::names() {
                if common::run_passing(&mut runner, &p, &x, v, shape_refusal).is_none() {
                    continue;
                }
                *ran.entry((v.to_string(), d)).or_default() += 1;
            }
        }
    }
    for d in [80u32, 128, 256] {
        for v in common::PORTABLE {
            assert!(
                ran.get(&(v.to_string(), d)).copied().unwrap_or(0) >= 4,
                "{v} D={d}: {ran:?}"
            );
        }
        // `tiled` runs all five, the training step (its fused backward) included.
        assert_eq!(
            ran.get(&("tiled".to_string(), d)).copied(),
            Some(5),
            "tiled D={d}: {ran:?}"
        );
        assert_eq!(
            ran.get(&("split-kv".to_string(), d)).copied(),
            Some(1),
            "split-kv decodes at D={d}: {ran:?}"
        );
    }
}

/// `tiled`'s two kernels for D > 64, each forced: the chunked `rt3` (the default where the
/// adapter has subgroups of >= 8 lanes) and `rt`, at D = 80, 128 and 256 in f32, f16 and bf16:
/// causal top-left with a partial last block, bottom-right GQA 8:2 with N < M, non-causal
/// N > M (every key block partial at M = 24), MQA decode, and dropout 0.2 in training mode;
/// every run PASSes against the f64 oracle.
#[test]
fn tiled_rt3_and_rt_pass_at_wide_heads_in_every_dtype() {
    use attn_wgpu::problem::Mode;
    use attn_wgpu::tile::{TileChoice, TileRequest};
    let gpu = common::gpu();
    let mut runner = Runner::new(gpu).unwrap();
    let mut ran = 0;
    for (d, dtype) in [(80u32, DType::F32), (128, DType::F16), (256, DType::BF16)] {
        for (n, m, h, hkv, causal, align, dropout) in [
            (70u32, 70u32, 2u32, 2u32, true, CausalAlign::TopLeft, 0.0),
            (24, 40, 8, 2, true, CausalAlign::BottomRight, 0.0),
            (40, 24, 2, 2, false, CausalAlign::TopLeft, 0.0),
            (1, 96, 4, 1, false, CausalAlign::TopLeft, 0.0),
            (40, 40, 2, 2, true, CausalAlign::TopLeft, 0.2),
        ] {
            let mut p = Problem::new(1, h, n, d, causal, (d * 1000 + n) as u64);
            p.kv_seq = m;
            p.kv_heads = hkv;
            p.causal_align = align;
            p.dtype = dtype;
            if dropout > 0.0 {
                p.dropout = dropout;
                p.mode = Mode::Train;
            }
            if dtype == DType::F16 && !gpu.caps.f16 {
                continue;
            }
            let x = Inputs::generate(&p);
            for choice in [TileChoice::Chunked, TileChoice::RegisterTiled] {
                p.tile = Some(TileRequest {
                    choice,
                    source: "--tile".into(),
                });
                let r = common::run_passing(&mut runner, &p, &x, "tiled", |_| false).unwrap();
                let used = r
                    .plan
                    .as_ref()
                    .and_then(|pl| pl.tile.as_ref())
                    .map(|t| t.choice);
                assert_eq!(used, Some(choice), "{}", p.shape_string());
                ran += 1;
            }
        }
    }
    assert!(ran >= 20, "{ran} runs");
}

#[test]
fn the_two_alignments_differ_and_agree_when_n_equals_m() {
    let mut p = Problem::new(1, 1, 4, 2, true, 1);
    p.kv_seq = 6;
    assert_eq!(p.keys_for_row(0), 1);
    p.causal_align = CausalAlign::BottomRight;
    assert_eq!(p.causal_offset(), 2);
    assert_eq!(p.keys_for_row(0), 3);
    assert_eq!(p.keys_for_row(3), 6);
    p.kv_seq = 2;
    assert_eq!(p.keys_for_row(0), 0, "row 0 of 4 with 2 keys sees none");
    assert_eq!(p.allowed_pairs_per_head(), 1 + 2);
    p.kv_seq = 4;
    assert_eq!(p.causal_offset(), 0);
    assert_eq!(p.allowed_pairs_per_head(), 10);
}

#[test]
fn cli_kv_seq_alignment_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        let mut c = bin();
        c.args([
            "run",
            "--heads",
            "2",
            "--head-dim",
            "8",
            "--reps",
            "1",
            "--warmup",
            "0",
        ]);
        c.args(extra);
        c.output().unwrap()
    };
    // Plain causal (the default) with N != M: exit 2 naming both choices.
    let o = run(&["--variant", "tiled", "--seq", "8", "--kv-seq", "12"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    for want in [
        "--causal top-left",
        "--causal bottom-right",
        "--no-causal",
        "N=8",
        "M=12",
    ] {
        assert!(stderr(&o).contains(want), "{want}: {}", stderr(&o));
    }
    let o = run(&[
        "--variant",
        "tiled",
        "--seq",
        "8",
        "--kv-seq",
        "12",
        "--causal",
        "diagonal",
    ]);
    common::assert_exit(&o, 2, &["--causal `diagonal`"]);
    let o = run(&[
        "--variant",
        "tiled",
        "--seq",
        "8",
        "--kv-seq",
        "0",
        "--no-causal",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // A run with M != N saves K, V of M rows; the files run again with M taken from --k.
    let inputs = dir.path().join("in");
    let o = run(&[
        "--variant",
        "unfused",
        "--seq",
        "8",
        "--kv-seq",
        "12",
        "--causal",
        "bottom-right",
        "--dropout",
        "0.2",
        "--save-inputs",
        inputs.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The keep mask of N x M scores.
    let bytes = std::fs::read(inputs.join("keep.npy")).unwrap();
    let keep = npyz::NpyFile::new(&bytes[..]).unwrap();
    assert_eq!(keep.shape(), &[1, 2, 8, 12]);
    let keep: Vec<bool> = keep.into_vec().unwrap();
    assert_eq!(
        keep,
        attn_wgpu::dropout::Dropout::new(0.2, 0)
            .unwrap()
            .keep_mask(2, 8, 12)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("causal (bottom-right) M=12"), "{text}");
    assert_eq!(
        attn_wgpu::npy::read_qkv(&inputs.join("k.npy"))
            .unwrap()
            .shape,
        vec![1, 2, 12, 8]
    );
    let o = common::run_on_files(
        &inputs,
        None,
        &[
            "--variant",
            "tiled",
            "--reps",
            "1",
            "--warmup",
            "0",
            "--causal",
            "bottom-right",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("M=12"));
    // A mask must be [N, M].
    let mask = dir.path().join("m.npy");
    attn_wgpu::npy::write_bool(&mask, &[8, 8], &[true; 64]).unwrap();
    let o = run(&[
        "--variant",
        "tiled",
        "--seq",
        "8",
        "--kv-seq",
        "12",
        "--no-causal",
        "--mask",
        mask.to_str().unwrap(),
    ]);
    common::assert_exit(&o, 2, &["expected shape [8, 12]"]);
}

/// Decode: `split-kv` (flash-decoding) passes forward and backward for N = 1..16 query rows over
/// many keys, with GQA, masks and both alignments; `auto` takes it there and not for long N.
#[test]
fn split_kv_decodes_and_auto_takes_it_only_for_decode() {
    let gpu = common::gpu();
    let mut runner = Runner::new(gpu).unwrap();
    // (N, M, H, Hkv, causal, alignment, backward, dtype): groups of 4, 2 and 1 query heads take
    // split_kv_hpl.wgsl (every lane set serves the whole group), the group of 8 split_kv.wgsl.
    for (n, m, h, kv, causal, align, backward, dtype) in [
        (
            1u32,
            300u32,
            4u32,
            1u32,
            false,
            CausalAlign::TopLeft,
            false,
            DType::F32,
        ),
        (
            4,
            517,
            4,
            2,
            true,
            CausalAlign::BottomRight,
            false,
            DType::BF16,
        ),
        (16, 200, 4, 4, true, CausalAlign::TopLeft, true, DType::F32),
        (
            3,
            400,
            4,
            2,
            true,
            CausalAlign::BottomRight,
            true,
            DType::F32,
        ),
        (
            2,
            333,
            8,
            1,
            true,
            CausalAlign::BottomRight,
            false,
            DType::F32,
        ),
    ] {
        let mut p = Problem::new(2, h, n, 32, causal, 9);
        p.kv_seq = m;
        p.kv_heads = kv;
        p.causal_align = align;
        p.backward = backward;
        p.dtype = dtype;
        let x = Inputs::generate(&p);
        let r = run_variant(gpu, &mut runner, &p, &x, "split-kv", SCHED, false).unwrap();
        let val = r.validation.as_ref().unwrap();
        assert_eq!(val.verdict, Verdict::Pass, "{}: {val:?}", p.shape_string());
        if let Some(t) = &r.training {
            assert!(
                t.grads.iter().all(|g| g.verdict == Verdict::Pass),
                "{:?}",
                t.grads
            );
        }
        let plan = variants::plan("split-kv", &p, &gpu.caps).unwrap();
        let kernel = if h / kv <= 4 {
            "split_kv_hpl.wgsl"
        } else {
            "split_kv.wgsl"
        };
        assert!(
            plan.dispatches[0].shader.file.starts_with(kernel),
            "{}: {}",
            p.shape_string(),
            plan.dispatches[0].shader.file
        );
        let splits = plan.config.iter().find(|(k, _)| k == "SPLITS").unwrap().1;
        assert!(splits >= 2.0, "{splits}");
        // One workgroup per (slice, row, K/V head): the group's query heads share it.
        assert_eq!(
            plan.dispatches[0].workgroups,
            [splits as u32, n, 2 * kv],
            "{}",
            p.shape_string()
        );
        assert_eq!(variants::auto(&p, &gpu.caps).unwrap().picked, "split-kv");
    }
    let p = Problem::new(1, 2, 64, 32, true, 1);
    match variants::plan("split-kv", &p, &gpu.caps) {
        Err(Error::Incompatible { reason, .. }) => {
            assert!(
                reason.contains("decode kernel") && reason.contains("N=64"),
                "{reason}"
            )
        }
        other => panic!("{:?}", other.map(|p| p.variant)),
    }
    assert_ne!(variants::auto(&p, &gpu.caps).unwrap().picked, "split-kv");
}

/// K and V of many keys can outgrow a binding while Q is tiny: every plan refuses with the buffer
/// named (the check in `variants::plan`), instead of failing at bind-group creation.
#[test]
fn every_plan_checks_every_buffer_against_the_binding_limit() {
    let mut caps = common::gpu().caps.clone();
    caps.max_storage_binding = 256 << 10;
    let mut p = Problem::new(1, 2, 1, 64, false, 0);
    p.kv_seq = 4096; // K, V: 2 MiB each; Q: 512 bytes
    for v in variants::names() {
        match variants::plan(v, &p, &caps) {
            Err(Error::Incompatible { reason, .. }) => assert!(
                reason.contains("does not offer")
                    || reason.contains("buffer `K`")
                    || reason.contains("buffer `V`")
                    || reason.contains("N x M score matrix")
                    || reason.contains("binding"),
                "{v}: {reason}"
            ),
            Ok(_) => panic!("{v}: planned K/V of 2 MiB under a 256 KiB binding limit"),
            Err(e) => panic!("{v}: {e}"),
        }
    }
    let e = variants::plan("tiled", &p, &caps).unwrap_err().to_string();
    assert!(e.contains("buffer `K`"), "{e}");
}

/// K and V larger than one storage binding (B16 Hkv8 M65536 D128 f16 on the H200: 2 GiB each,
/// the limit 2 GiB - 4): split-KV binds them by ranges, one split dispatch per chunk of K/V heads,
/// and still passes. Shown here by lowering the binding limit of the test adapter's caps.
#[test]
fn split_kv_binds_k_and_v_by_ranges_past_the_binding_limit() {
    use attn_wgpu::validate::{rows_to_check, validate};
    let gpu = common::gpu();
    let mut runner = Runner::new(gpu).unwrap();
    let mut p = Problem::new(2, 4, 1, 32, false, 11);
    p.kv_seq = 300; // 300 * 32 * 4 = 38400 bytes a K/V head (150 * 256)
    p.kv_heads = 2;
    let mut caps = gpu.caps.clone();
    caps.max_storage_binding = 80_000; // two K/V heads a range, of the four
    let plan = variants::plan("split-kv", &p, &caps).unwrap();
    let splits: Vec<_> = plan
        .dispatches
        .iter()
        .filter(|d| d.name == "split")
        .collect();
    assert_eq!(splits.len(), 2);
    for (c, d) in splits.iter().enumerate() {
        let k = d.bindings.iter().find(|b| b.buffer == "K").unwrap();
        assert_eq!(k.range, Some((c as u64 * 76_800, 76_800)));
        assert_eq!(d.params.head_offset, c as u32 * 4);
    }
    let x = Inputs::generate(&p);
    let m = runner.execute(&plan, &x, SCHED).unwrap();
    let val = validate(
        &p,
        &x,
        &m.output,
        &rows_to_check(&p),
        variants::find("split-kv").unwrap().fully_masked,
    );
    assert_eq!(val.verdict, Verdict::Pass, "{val:?}");
    // The whole plan under the real limit: one split dispatch, no ranges.
    let plan = variants::plan("split-kv", &p, &gpu.caps).unwrap();
    assert_eq!(plan.dispatches.len(), 2);
    assert!(plan
        .dispatches
        .iter()
        .all(|d| d.bindings.iter().all(|b| b.range.is_none())));
    // A K/V head whose bytes cannot start a range at the alignment (301 * 32 * 4 = 38528 bytes)
    // with room for only one a range: refused, naming the alignment.
    p.kv_seq = 301;
    caps.max_storage_binding = 40_000;
    match variants::plan("split-kv", &p, &caps) {
        Err(Error::Incompatible { reason, .. }) => {
            assert!(reason.contains("multiple of 256"), "{reason}")
        }
        other => panic!("{:?}", other.map(|p| p.variant)),
    }
}
