#!/usr/bin/env node
// Runs an ONNX model with ONNX Runtime (npm onnxruntime-node, CPU) on float32 inputs read from a
// file and writes its float32 outputs to another: the independent reference of ktune's model
// builds, and the peer bench/model_vs_ort races.
//
//   node ort-run.js MODEL INPUTS OUTPUTS [--threads N] [--time RUNS] [--serve] [--input NAME=DIMS]...
//
// INPUTS holds every graph input, in the graph's order, as raw little-endian float32 (NCHW as the
// model declares it; an int64 or int32 input of token ids in its own type); OUTPUTS receives every
// output as float32. Shapes come from the model (a
// symbolic dimension is taken as 1), or from --input NAME=1x3x320x320 as ktune takes them. With --time RUNS it also runs RUNS more times and prints
// one JSON line {"median_ms":..,"min_ms":..,"max_ms":..}. With --serve, after writing OUTPUTS it
// prints "ready" and then answers each line N of stdin with the N run times in ms on one line
// (space-separated), so a benchmark can interleave rounds with another program's; it exits at
// end of input. Needs onnxruntime-node on NODE_PATH.
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

async function main() {
  const argv = process.argv.slice(2);
  const positional = [];
  let threads = 1, timeRuns = 0, serve = false;
  const given = {};
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] === '--input') {
      const text = argv[++i];
      const eq = text.lastIndexOf('=');
      given[text.slice(0, eq)] = text.slice(eq + 1).split('x').map((d) => parseInt(d, 10));
    } else if (argv[i] === '--threads') threads = parseInt(argv[++i], 10);
    else if (argv[i] === '--time') timeRuns = parseInt(argv[++i], 10);
    else if (argv[i] === '--serve') serve = true;
    else positional.push(argv[i]);
  }
  if (positional.length !== 3) throw new Error('usage: ort-run.js MODEL INPUTS OUTPUTS [--threads N] [--time RUNS]');
  const [modelPath, inputsPath, outputsPath] = positional;
  const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all',
  });
  const raw = fs.readFileSync(inputsPath);
  // Each input in its own element type: float32, or int64 / int32 (token ids).
  const arrays = { float32: Float32Array, int64: BigInt64Array, int32: Int32Array };
  const feeds = {};
  let at = 0;
  for (const meta of session.inputMetadata) {
    const dims = given[meta.name] || meta.shape.map((d) => (typeof d === 'number' && d > 0 ? d : 1));
    const n = dims.reduce((a, b) => a * b, 1);
    const type = meta.type || 'float32';
    const Typed = arrays[type];
    if (!Typed) throw new Error(`input '${meta.name}' is ${type}: ort-run.js reads float32, int64, int32`);
    const bytes = n * Typed.BYTES_PER_ELEMENT;
    if (at + bytes > raw.length) throw new Error(`inputs file too short for input '${meta.name}'`);
    const copy = Uint8Array.prototype.slice.call(raw, at, at + bytes);  // aligned for the typed view
    feeds[meta.name] = new ort.Tensor(type, new Typed(copy.buffer), dims);
    at += bytes;
  }
  if (at !== raw.length) throw new Error(`inputs file has ${raw.length - at} bytes too many`);
  const results = await session.run(feeds);
  const parts = session.outputNames.map((name) => Buffer.from(results[name].data.buffer,
    results[name].data.byteOffset, results[name].data.byteLength));
  fs.writeFileSync(outputsPath, Buffer.concat(parts));
  if (timeRuns > 0) {
    const ms = [];
    for (let r = 0; r < timeRuns; ++r) {
      const start = process.hrtime.bigint();
      await session.run(feeds);
      ms.push(Number(process.hrtime.bigint() - start) / 1e6);
    }
    ms.sort((a, b) => a - b);
    console.log(JSON.stringify({ median_ms: ms[Math.floor(ms.length / 2)], min_ms: ms[0], max_ms: ms[ms.length - 1] }));
  }
  if (serve) {
    console.log('ready');
    const lines = require('readline').createInterface({ input: process.stdin });
    for await (const line of lines) {
      const n = parseInt(line, 10);
      const ms = [];
      for (let r = 0; r < n; ++r) {
        const start = process.hrtime.bigint();
        await session.run(feeds);
        ms.push(Number(process.hrtime.bigint() - start) / 1e6);
      }
      console.log(ms.join(' '));
    }
  }
}

main().catch((e) => {
  console.error(`ort-run: ${e.message}`);
  process.exit(1);
});
