#!/usr/bin/env node
// Runs an ONNX model with onnxruntime-node (the numerical reference for whole models) on float32 .npy
// inputs and writes its outputs as float32 .npy files.
//
// Usage: node ort_run.js MODEL.onnx INPUT_DIR OUTPUT_DIR
//   INPUT_DIR/NAME.npy for every model input NAME; writes OUTPUT_DIR/NAME.npy for every output.
// onnxruntime-node is found through NODE_PATH (scripts/golden_check.py sets it to the folder where
// `npm install --ignore-scripts onnxruntime-node` put it).
'use strict';
const fs = require('fs');
const path = require('path');

function readNpy(file) {
  const b = fs.readFileSync(file);
  if (b.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = b[6];
  const hlen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const off = major === 1 ? 10 : 12;
  const header = b.toString('latin1', off, off + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (descr !== '<f4') throw new Error(`${file}: expected float32 ('<f4'), got '${descr}'`);
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order is not supported`);
  const dims = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const n = dims.reduce((a, d) => a * d, 1);
  const data = new Float32Array(n);
  const body = b.subarray(off + hlen);
  for (let k = 0; k < n; k++) data[k] = body.readFloatLE(4 * k);
  return { dims, data };
}

function writeNpy(file, dims, data) {
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': ${shape}, }`;
  const pad = 64 - ((10 + header.length + 1) % 64);
  header += ' '.repeat(pad === 64 ? 0 : pad) + '\n';
  const h = Buffer.alloc(10);
  h.write('\x93NUMPY', 0, 'latin1');
  h[6] = 1;
  h[7] = 0;
  h.writeUInt16LE(header.length, 8);
  const body = Buffer.alloc(4 * data.length);
  for (let k = 0; k < data.length; k++) body.writeFloatLE(data[k], 4 * k);
  fs.writeFileSync(file, Buffer.concat([h, Buffer.from(header, 'latin1'), body]));
}

async function main() {
  const [model, inDir, outDir] = process.argv.slice(2);
  if (!model || !inDir || !outDir) {
    console.error('usage: node ort_run.js MODEL.onnx INPUT_DIR OUTPUT_DIR');
    process.exit(2);
  }
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    console.error('onnxruntime-node is not installed: npm install --ignore-scripts onnxruntime-node, then set NODE_PATH');
    process.exit(2);
  }
  // One thread and all graph optimisations: deterministic and what a user would run.
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1, interOpNumThreads: 1 });
  const feeds = {};
  for (const name of session.inputNames) {
    const t = readNpy(path.join(inDir, `${name}.npy`));
    feeds[name] = new ort.Tensor('float32', t.data, t.dims);
  }
  const results = await session.run(feeds);
  fs.mkdirSync(outDir, { recursive: true });
  for (const name of session.outputNames) {
    const t = results[name];
    if (t.type !== 'float32') throw new Error(`output ${name} is ${t.type}, not float32`);
    writeNpy(path.join(outDir, `${name}.npy`), t.dims.map(Number), t.data);
  }
}

main().catch((e) => {
  console.error(`ort_run.js: ${e.message}`);
  process.exit(1);
});
