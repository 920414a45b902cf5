// Node's ajv (Draft 2020-12) judges requests against gen-repo's request schemas: the non-Python check of
// tests/contracts/test_request_schema.py. stdin: {"schemas": {name: schema}, "cases": [{"schema": name, "request": {}}]};
// stdout: {"compile_errors": {name: message}, "verdicts": [true|false, ...]} in case order.
import { readFileSync } from "node:fs";
import Ajv2020 from "ajv/dist/2020.js";

const input = JSON.parse(readFileSync(0, "utf8"));
// strict: every keyword must be one ajv knows and applies, so a schema ajv would half-read fails to compile.
const ajv = new Ajv2020({ strict: true, allErrors: false });
const validators = {};
const compileErrors = {};
for (const [name, schema] of Object.entries(input.schemas)) {
  try {
    validators[name] = ajv.compile(schema);
  } catch (error) {
    compileErrors[name] = String(error.message || error);
  }
}
const verdicts = input.cases.map((c) => (validators[c.schema] ? validators[c.schema](c.request) : null));
process.stdout.write(JSON.stringify({ compile_errors: compileErrors, verdicts }));
