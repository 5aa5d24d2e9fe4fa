/** `npm run test:reliability`: strict mode's property tests (test/extension/approval-strict-property.test.ts), 50 times as many cases with a new seed. */
import "../extension/approval-strict-property.test.ts";
