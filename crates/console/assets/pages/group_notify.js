// A group's notification destinations: what each hears, where it sends, its health, and
// its last deliveries, with "Redeliver" and "Send test" for those whose role may manage the
// group (as the API authorizes: the API stays the judge).
import { html, useState } from '../vendor/preact-htm-standalone.js';
import { api } from '../api.js';
import * as endpoints from '../endpoints.js';
import { t, ErrorBanner, Time, useLoad, may, manageAction, ACTION_ROLE } from '../ui.js';

/** Where a destination sends, in words: a webhook's URL; never a Slack URL (a secret). */
export function sendsTo(d) {
  return d.type === 'webhook' ? (d.url ?? '') : 'a Slack incoming webhook';
}

/** The kinds it hears, in words. */
export function eventsText(d) {
  return d.events && d.events.length ? d.events.join(', ') : 'every kind of event';
}

/** A delivery's state in words. */
export function deliveryWords(state) {
  return { delivered: 'delivered', retrying: 'retrying', gave_up: 'gave up' }[state] ?? String(state ?? '');
}

function Delivery({ d, canSend, onRedeliver, busy }) {
  return html`<tr data-test="delivery" data-id=${d.id} data-state=${d.state}>
    <td><${Time} value=${d.attempted_at} /></td>
    <td><code>${t(d.event_type)}</code></td>
    <td>${t(d.environment ?? '')}</td>
    <td data-test="delivery-state">${deliveryWords(d.state)}</td>
    <td>${t(d.status ?? '-')}</td>
    <td>${t(d.attempts)}</td>
    <td>${t(d.latency_ms)} ms</td>
    <td class="muted">${t(d.reason ?? '')}</td>
    <td>${canSend && html`<button type="button" data-test="redeliver" disabled=${busy} onClick=${() => onRedeliver(d.id)}>Redeliver</button>`}</td>
  </tr>`;
}

function Deliveries({ group, name, canSend, onHealth }) {
  const [stamp, setStamp] = useState(0);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const [sent, setSent] = useState(null);
  const { data, error: loadError, loading } = useLoad(() => api('GET', endpoints.list_notification_deliveries(endpoints.group(group), name)), [group, name, stamp]);
  const rows = (data && data.deliveries) || [];
  const redeliver = async (id) => {
    setBusy(true);
    setError(null);
    try {
      const answer = await api('POST', endpoints.redeliver_notification(endpoints.group(group), name, id));
      setSent(answer.delivery);
      setStamp(stamp + 1);
      onHealth();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return html`<div class="deliveries" data-test="deliveries" data-loaded=${loading ? undefined : 'true'}>
    <${ErrorBanner} error=${loadError || error} />
    ${sent && html`<p data-test="redelivered" role="status">Sent again: ${deliveryWords(sent.state)}${sent.status ? ` (${sent.status})` : ''}.</p>`}
    ${!loading && !loadError && rows.length === 0 && html`<p class="muted">No deliveries yet.</p>`}
    ${rows.length > 0 && html`<table class="table">
      <caption class="visually-hidden">Last deliveries, newest first</caption>
      <thead><tr><th scope="col">When</th><th scope="col">Event</th><th scope="col">Environment</th><th scope="col">State</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Latency</th><th scope="col">Why</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
      <tbody>${rows.map((d) => html`<${Delivery} d=${d} canSend=${canSend} onRedeliver=${redeliver} busy=${busy} />`)}</tbody>
    </table>`}
  </div>`;
}

function Destination({ group, d, canSend, onHealth }) {
  const [open, setOpen] = useState(false);
  const [test, setTest] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const sendTest = async () => {
    setBusy(true);
    setError(null);
    setTest(null);
    try {
      setTest((await api('POST', endpoints.test_notification(endpoints.group(group), d.name))).delivery);
      onHealth();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const healthy = d.health ? d.health.healthy !== false : true;
  return html`<li class="row" data-test="destination" data-name=${d.name}>
    <div class="row-head">
      <strong>${t(d.name)}</strong> <span class="badge">${t(d.type)}</span>
      ${' '}<span class=${healthy ? 'badge' : 'badge badge-bad'} data-test="destination-health" data-healthy=${healthy ? 'true' : 'false'}>${healthy ? 'healthy' : 'unhealthy'}</span>
    </div>
    ${d.description && html`<p>${t(d.description)}</p>`}
    <p class="muted">Sends ${t(eventsText(d))} of <code>${t(d.environments ?? '**')}</code> to <code>${t(sendsTo(d))}</code></p>
    ${!healthy && html`<p data-test="destination-failure">Failing since <${Time} value=${d.health.failing_since} />: ${t(d.health.last_failure ?? '')}</p>`}
    <div class="actions">
      <button type="button" data-test="deliveries-toggle" aria-expanded=${open ? 'true' : 'false'} onClick=${() => setOpen(!open)}>${open ? 'Hide deliveries' : 'Deliveries'}</button>
      ${canSend && html` <button type="button" data-test="notify-test" disabled=${busy} onClick=${sendTest}>${busy ? 'Sending…' : 'Send test'}</button>`}
    </div>
    <${ErrorBanner} error=${error} />
    ${test && html`<p data-test="notify-result" data-state=${test.state} role="status">Test ${deliveryWords(test.state)}${test.status ? `: the receiver answered ${test.status} in ${test.latency_ms} ms` : ''}${test.reason ? ` (${test.reason})` : ''}.</p>`}
    ${open && html`<${Deliveries} group=${group} name=${d.name} canSend=${canSend} onHealth=${onHealth} />`}
  </li>`;
}

/** The group page's "Notifications" card. */
export function Notifications({ group, me }) {
  const [stamp, setStamp] = useState(0);
  const { data, error, loading } = useLoad(() => api('GET', endpoints.list_notifications(endpoints.group(group))), [group, stamp]);
  const destinations = (data && data.destinations) || [];
  const action = manageAction(group);
  const canSend = !!me && may(me.memberships, action, group);
  return html`<section class="card wide" data-test="notifications" aria-labelledby="notify-h">
    <h2 id="notify-h">Notifications</h2>
    <${ErrorBanner} error=${error} />
    ${loading && !data && html`<p class="muted">Loading…</p>`}
    ${!loading && !error && destinations.length === 0 && html`<p class="muted">No notification destinations at this group: add one with <code>sortie notify create GROUP/NAME --webhook URL</code>.</p>`}
    ${me && !canSend && destinations.length > 0 && html`<p class="muted" data-test="notify-denied">Sending a test or a redelivery needs the ${ACTION_ROLE[action]} role here.</p>`}
    <ul class="rows">${destinations.map((d) => html`<${Destination} key=${d.name} group=${group} d=${d} canSend=${canSend} onHealth=${() => setStamp(stamp + 1)} />`)}</ul>
  </section>`;
}
