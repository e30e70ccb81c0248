// The official SDK, unmodified, for a browser page: esbuild bundles `@stackframe/js` (as installed from npm by
// `npm ci`) into one script that sets `window.Stack` (tests/dashboard/test_sdk_in_browser.py builds and serves it).
import { StackClientApp } from "@stackframe/js";

window.Stack = { StackClientApp };
