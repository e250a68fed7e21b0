/**
 * Loaded before every test file (bunfig.toml `[test] preload`): the suite's environment in the test
 * process itself, so in-process contexts (`helpers/context.ts`, which creates the built-in admin) hash
 * at the same low cost as the servers the helpers start. A variable already set is left as it is.
 */
import { SUITE_ENV } from "./suite-env";

for (const [name, value] of Object.entries(SUITE_ENV)) process.env[name] ??= value;
