// Tests of the group page's notifications card, its pure parts (pages/group_notify.js): where
// a destination sends (never a Slack URL, a secret), what it hears, a delivery's state.
// The card itself is tested in Chromium by scripts/console_test.py (scripts/console_notify.py).
import { test } from "node:test";
import assert from "node:assert/strict";
import { sendsTo, eventsText, deliveryWords } from "../assets/pages/group_notify.js";

test("a webhook shows its URL; Slack never shows one", () => {
  assert.equal(sendsTo({ type: "webhook", url: "https://hooks.example.com/x" }), "https://hooks.example.com/x");
  assert.equal(sendsTo({ type: "slack", url: "https://hooks.slack.com/services/T/B/secret" }), "a Slack incoming webhook");
});

test("no events listed means every kind", () => {
  assert.equal(eventsText({ events: [] }), "every kind of event");
  assert.equal(eventsText({}), "every kind of event");
  assert.equal(eventsText({ events: ["job_failed", "awaiting_approval"] }), "job_failed, awaiting_approval");
});

test("a delivery's state in words", () => {
  assert.equal(deliveryWords("gave_up"), "gave up");
  assert.equal(deliveryWords("delivered"), "delivered");
  assert.equal(deliveryWords("retrying"), "retrying");
  assert.equal(deliveryWords(undefined), "");
});
