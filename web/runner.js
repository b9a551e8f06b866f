// runner.js — the browser runner of attn-wgpu (docs/browser.md). `attn-wgpu browser` serves this
// page on 127.0.0.1; the page runs the plans the tool declares, exactly as the native runner
// does (src/gpu/runner): every buffer and dispatch of a job, one compute pass per dispatch with a
// timestamp at its beginning and end, a cold call, warm-up, recorded forwards, then the output
// and gradients read back. The tool validates them against its f64 reference and writes the
// result file. Protocol (all on the serving origin):
//   POST /adapter   {adapter info, features, limits, user agent} -> {jobs: n}
//   GET  /job/<i>   the i-th job (src/browser.rs `Job`)
//   GET  /input/<i>/<buffer>    raw bytes of an input buffer
//   POST /output/<i>/<buffer>   raw bytes read back
//   POST /result/<i>            the samples (src/browser.rs `PageRun`)
//   POST /compiled/<i>          a compile-only job's messages (`PageCompiled`)
//   POST /fail      {message}   a failure the tool reports and exits on (exit 1)
//   POST /done
"use strict";

const t0 = performance.now();
const cache = new Map(); // pipelines by what defines them, shared by every job of the page
const log = (s) => {
  document.getElementById("log").textContent += s + "\n";
};
const post = (path, body) =>
  fetch(path, {
    method: "POST",
    body: typeof body === "string" || body instanceof ArrayBuffer ? body : JSON.stringify(body),
  }).then((r) => {
    if (!r.ok) throw new Error(`POST ${path}: HTTP ${r.status}`);
    return r;
  });
const get = async (path) => {
  const r = await fetch(path);
  if (!r.ok) throw new Error(`GET ${path}: HTTP ${r.status}`);
  return r;
};

// The optional features the kernels may use, asked for where the adapter has them.
const FEATURES = ["timestamp-query", "shader-f16", "subgroups"];

async function openDevice() {
  if (!navigator.gpu) throw new Error("this browser has no WebGPU (navigator.gpu is missing)");
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) throw new Error("navigator.gpu.requestAdapter() returned no adapter");
  const features = FEATURES.filter((f) => adapter.features.has(f));
  const l = adapter.limits;
  const limits = {
    maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize,
    maxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup,
    maxComputeWorkgroupSizeX: l.maxComputeWorkgroupSizeX,
    maxComputeWorkgroupsPerDimension: l.maxComputeWorkgroupsPerDimension,
    maxStorageBufferBindingSize: l.maxStorageBufferBindingSize,
    maxBufferSize: l.maxBufferSize,
    maxStorageBuffersPerShaderStage: l.maxStorageBuffersPerShaderStage,
  };
  const device = await adapter.requestDevice({ requiredFeatures: features, requiredLimits: limits });
  device.addEventListener("uncapturederror", (e) => fail(`WebGPU error: ${e.error.message}`));
  const info = adapter.info || {};
  const described = {
    vendor: info.vendor || "",
    architecture: info.architecture || "",
    device: info.device || "",
    description: info.description || "",
    user_agent: navigator.userAgent,
    features,
    subgroup_min_size: info.subgroupMinSize || 0,
    subgroup_max_size: info.subgroupMaxSize || 0,
    max_workgroup_storage: limits.maxComputeWorkgroupStorageSize,
    max_invocations_per_workgroup: limits.maxComputeInvocationsPerWorkgroup,
    max_workgroup_size_x: limits.maxComputeWorkgroupSizeX,
    max_workgroups_per_dimension: limits.maxComputeWorkgroupsPerDimension,
    max_storage_binding: limits.maxStorageBufferBindingSize,
    max_buffer: limits.maxBufferSize,
    max_storage_buffers_per_stage: limits.maxStorageBuffersPerShaderStage,
  };
  return { device, described, timestamps: features.includes("timestamp-query") };
}

// Compiles one dispatch: the module (its compilation messages are errors here, as in the tool's
// shader test), then the pipeline on an explicit layout: binding 0 the uniform, 1.. storage.
async function pipeline(device, d) {
  const m0 = performance.now();
  const module = device.createShaderModule({ code: d.code, label: d.label });
  const info = await module.getCompilationInfo();
  const messages = info.messages.map((m) => `${m.type}: ${m.lineNum}:${m.linePos}: ${m.message}`);
  const errors = info.messages.filter((m) => m.type === "error");
  if (errors.length && !d.compile_only) {
    const m = errors[0];
    throw new Error(`${d.label}: line ${m.lineNum}:${m.linePos}: ${m.message}`);
  }
  const m1 = performance.now();
  if (errors.length) return { messages, module_ms: m1 - m0, pipeline_ms: 0 };
  const entries = [{ binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: "uniform" } }];
  d.bindings.forEach(([, readOnly], i) =>
    entries.push({
      binding: i + 1,
      visibility: GPUShaderStage.COMPUTE,
      buffer: { type: readOnly ? "read-only-storage" : "storage" },
    }),
  );
  const layout = device.createBindGroupLayout({ entries });
  const constants = Object.fromEntries(d.constants);
  const p = await device.createComputePipelineAsync({
    layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }),
    compute: { module, entryPoint: d.entry, constants },
  });
  return { pipeline: p, layout, messages, module_ms: m1 - m0, pipeline_ms: performance.now() - m1 };
}

// One forward: every dispatch in its own pass with begin/end timestamps, then the wait.
async function forward(device, job, st) {
  const start = performance.now();
  const enc = device.createCommandEncoder();
  job.dispatches.forEach((d, i) => {
    const desc = st.query ? { timestampWrites: { querySet: st.query, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 } } : {};
    const pass = enc.beginComputePass(desc);
    pass.setPipeline(st.pipelines[i].pipeline);
    pass.setBindGroup(0, st.groups[i]);
    pass.dispatchWorkgroups(...d.workgroups);
    pass.end();
  });
  const n = 2 * job.dispatches.length;
  if (st.query) {
    enc.resolveQuerySet(st.query, 0, n, st.resolve, 0);
    enc.copyBufferToBuffer(st.resolve, 0, st.stamps, 0, n * 8);
  }
  device.queue.submit([enc.finish()]);
  const submitted = performance.now();
  let ns = [];
  if (st.query) {
    await st.stamps.mapAsync(GPUMapMode.READ);
    const t = new BigUint64Array(st.stamps.getMappedRange().slice(0));
    st.stamps.unmap();
    const base = t[0];
    for (let i = 0; i < job.dispatches.length; i++) {
      ns.push([Number(t[2 * i] - base), Number(t[2 * i + 1] - base)]);
    }
    if (ns.some(([b, e]) => !(e >= b) || b < 0)) ns = []; // a broken pair: no GPU times, not wrong ones
    // Chrome rounds timestamps to 100 µs unless its WebGPU developer features are on: count how
    // many stamps fall off that grid instead of keeping them all.
    st.seen += t.length;
    st.offGrid += t.filter((x) => x % 100000n !== 0n).length;
  } else {
    await device.queue.onSubmittedWorkDone();
  }
  return { ns, encode_submit_ms: submitted - start, wait_ms: performance.now() - submitted, start_ms: start - t0 };
}

async function readBack(device, buf, size) {
  const staging = device.createBuffer({ size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const enc = device.createCommandEncoder();
  enc.copyBufferToBuffer(buf, 0, staging, 0, size);
  device.queue.submit([enc.finish()]);
  await staging.mapAsync(GPUMapMode.READ);
  const bytes = staging.getMappedRange().slice(0);
  staging.unmap();
  staging.destroy();
  return bytes;
}

async function runJob(dev, i) {
  const { device, timestamps } = dev;
  const job = await (await get(`/job/${i}`)).json();
  log(`${job.variant}: ${job.dispatches.length} dispatch(es)`);
  // 1. Buffers, 2. uploads (inputs; 0xFF poison in the outputs), 3. pipelines, 4. bind groups.
  const b0 = performance.now();
  const bufs = {};
  for (const b of job.buffers) {
    bufs[b.name] = device.createBuffer({
      size: b.size,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
    });
  }
  const b1 = performance.now();
  for (const b of job.buffers) {
    if (b.upload) {
      const data = await (await get(`/input/${i}/${encodeURIComponent(b.name)}`)).arrayBuffer();
      device.queue.writeBuffer(bufs[b.name], 0, data, 0, Math.min(data.byteLength, b.size) & ~3);
    } else if (b.poison) {
      device.queue.writeBuffer(bufs[b.name], 0, new Uint8Array(b.size).fill(0xff));
    }
  }
  await device.queue.onSubmittedWorkDone();
  const b2 = performance.now();
  // One pipeline per distinct (WGSL, entry point, constants, bindings), as the native runner's cache.
  const pipelines = [];
  for (const d of job.dispatches) {
    const key = JSON.stringify([d.code, d.entry, d.constants, d.bindings.map((b) => b[1])]);
    if (!cache.has(key)) cache.set(key, await pipeline(device, { ...d, compile_only: job.compile_only }));
    pipelines.push(cache.get(key));
  }
  const compiles = pipelines.map((p, k) => ({
    dispatch: job.dispatches[k].name,
    module_ms: p.module_ms,
    pipeline_ms: p.pipeline_ms,
    messages: p.messages,
  }));
  if (job.compile_only) {
    // The shader test: every module and pipeline created, every message returned; nothing runs.
    await device.queue.onSubmittedWorkDone();
    await post(`/compiled/${i}`, { compiles });
    for (const b of Object.values(bufs)) b.destroy();
    log(`${job.variant}: compiled`);
    return;
  }
  const groups = job.dispatches.map((d, k) => {
    const params = device.createBuffer({ size: d.params.length * 4, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
    device.queue.writeBuffer(params, 0, new Uint32Array(d.params));
    const entries = [{ binding: 0, resource: { buffer: params } }];
    d.bindings.forEach(([name, , range], j) => {
      const resource = range ? { buffer: bufs[name], offset: range[0], size: range[1] } : { buffer: bufs[name] };
      entries.push({ binding: j + 1, resource });
    });
    return device.createBindGroup({ layout: pipelines[k].layout, entries });
  });
  const n = 2 * job.dispatches.length;
  const st = { pipelines, groups, seen: 0, offGrid: 0 };
  if (timestamps) {
    st.query = device.createQuerySet({ type: "timestamp", count: n });
    st.resolve = device.createBuffer({ size: n * 8, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
    st.stamps = device.createBuffer({ size: n * 8, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  }
  // 5. The cold call, the warm-up (at least `warmup_ms` of it), the recorded forwards.
  const first = await forward(device, job, st);
  const warmup = [];
  const w0 = performance.now();
  for (let k = 0; k < job.warmup; k++) warmup.push(await forward(device, job, st));
  let extra = 0;
  while (performance.now() - w0 < job.warmup_ms && extra < 100000) {
    await forward(device, job, st);
    extra++;
  }
  const warmupElapsed = performance.now() - w0;
  const reps = [];
  for (let k = 0; k < job.reps; k++) reps.push(await forward(device, job, st));
  // 6. Read back O and the gradients.
  const r0 = performance.now();
  for (const name of job.outputs) {
    const size = job.buffers.find((b) => b.name === name).size;
    await post(`/output/${i}/${encodeURIComponent(name)}`, await readBack(device, bufs[name], size));
  }
  const r1 = performance.now();
  const quantized = st.seen > 2 && st.offGrid === 0;
  await post(`/result/${i}`, {
    compiles,
    buffers_ms: b1 - b0,
    upload_ms: b2 - b1,
    first,
    warmup,
    extra_forwards: extra,
    warmup_elapsed_ms: warmupElapsed,
    reps,
    readback_ms: r1 - r0,
    readback_start_ms: r0 - t0,
    quantized,
  });
  for (const b of Object.values(bufs)) b.destroy();
  log(`${job.variant}: done`);
}

async function fail(message) {
  log(`FAILED: ${message}`);
  try {
    await post("/fail", { message: String(message) });
  } catch (_) {
    /* the tool is gone: nothing to tell */
  }
}

async function main() {
  try {
    const dev = await openDevice();
    log(`adapter: ${JSON.stringify(dev.described)}`);
    const { jobs } = await (await post("/adapter", dev.described)).json();
    for (let i = 0; i < jobs; i++) await runJob(dev, i);
    await post("/done", "");
    log("all done");
  } catch (e) {
    await fail(e && e.message ? e.message : e);
  }
}

main();
