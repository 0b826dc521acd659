// What Python says, for the JavaScript's unit tests: tests/js/fixtures/python.json, made by
// `python tests/test_js.py` (tests/test_js.py fails when it is stale).
import { readFileSync } from "node:fs";

export const PYTHON = JSON.parse(readFileSync(new URL("./fixtures/python.json", import.meta.url), "utf8"));
