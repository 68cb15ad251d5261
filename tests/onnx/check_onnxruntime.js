// Runs every model weft_onnx_cases exported in onnxruntime (npm's onnxruntime-node, CPU) and
// compares its outputs with weft's: floating outputs within the case's tolerance,
// |ort - weft| <= tol * max(1, |weft|) (NaN where weft has NaN), integer and bool outputs exactly.
// Usage: node check_onnxruntime.js DIR NODE_MODULES
'use strict';
const fs = require('fs');
const path = require('path');

const [dir, modules] = process.argv.slice(2);
if (!dir || !modules) {
  console.error('usage: node check_onnxruntime.js DIR NODE_MODULES');
  process.exit(2);
}
const ort = require(path.resolve(modules, 'onnxruntime-node'));

const arrays = {
  float32: [Float32Array, 'float32'],
  float64: [Float64Array, 'float64'],
  int64: [BigInt64Array, 'int64'],
  int32: [Int32Array, 'int32'],
  uint8: [Uint8Array, 'uint8'],
  bool: [Uint8Array, 'bool'],
};

function load(entry) {
  const [Array, type] = arrays[entry.dtype];
  const bytes = fs.readFileSync(path.join(dir, entry.file));
  const copy = new ArrayBuffer(bytes.length);
  new Uint8Array(copy).set(bytes);
  return new ort.Tensor(type, new Array(copy), entry.shape);
}

async function main() {
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
  if (manifest.cases.length === 0) throw new Error('no cases');
  let failed = 0;
  for (const c of manifest.cases) {
    const session = await ort.InferenceSession.create(path.join(dir, c.model));
    const feeds = {};
    for (const input of c.inputs) feeds[input.name] = load(input);
    const results = await session.run(feeds);
    let worst = 0;
    const problems = [];
    for (const expected of c.outputs) {
      const got = results[expected.name];
      const want = load(expected);
      if (!got) {
        problems.push(`${expected.name}: missing`);
        continue;
      }
      if (JSON.stringify(got.dims) !== JSON.stringify(want.dims) || got.type !== want.type) {
        problems.push(`${expected.name}: ${got.type}[${got.dims}] where weft has ` +
                      `${want.type}[${want.dims}]`);
        continue;
      }
      const floating = want.type === 'float32' || want.type === 'float64';
      for (let i = 0; i < want.data.length; ++i) {
        const a = Number(got.data[i]), b = Number(want.data[i]);
        if (floating) {
          if (isNaN(a) && isNaN(b)) continue; // NaN where weft has NaN
          const err = Math.abs(a - b) / Math.max(1, Math.abs(b));
          if (!(err <= c.tolerance)) {
            if (problems.length < 5) problems.push(`${expected.name}[${i}]: ${a} vs weft ${b}`);
            worst = Math.max(worst, isNaN(err) ? Infinity : err);
          } else {
            worst = Math.max(worst, err);
          }
        } else if (a !== b) {
          if (problems.length < 5) problems.push(`${expected.name}[${i}]: ${a} vs weft ${b}`);
          worst = Infinity;
        }
      }
    }
    const ok = problems.length === 0;
    if (!ok) failed++;
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${c.name.padEnd(36)} max error ${worst.toExponential(2)}` +
                ` (tolerance ${c.tolerance})`);
    for (const p of problems) console.log(`       ${p}`);
  }
  if (failed) {
    console.log(`${failed} of ${manifest.cases.length} models differ from weft`);
    process.exit(1);
  }
  console.log(`all ${manifest.cases.length} models match weft in onnxruntime ${ort.env.versions.common}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
