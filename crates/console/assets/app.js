// The console's entry: a hash router, the header (who is signed in, sign out) and the
// pages. No token: the sign-in page. Routes: #/ (tree), #/env/<path>, #/jobs/<id>,
// #/groups/<path>, #/audit/<org>, #/signin.
import { html, render, useEffect, useState } from './vendor/preact-htm-standalone.js';
import { ApiError } from './api.js';
import { config, token, signOut, whoami, signInWithToken, signInOidc, completeOidcRedirect, takeNotice } from './auth.js';
import { ErrorBanner, t, parseRoute } from './ui.js';
import { TreePage } from './pages/tree.js';
import { EnvPage } from './pages/env.js';
import { GroupPage } from './pages/group.js';
import { JobPage } from './pages/job.js';
import { AuditPage } from './pages/audit.js';

const BACK_KEY = 'sortie.back';

function useHash() {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const on = () => setHash(location.hash);
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return hash;
}

function useSignedIn() {
  const [signedIn, setSignedIn] = useState(token() !== null);
  useEffect(() => {
    const on = () => setSignedIn(token() !== null);
    window.addEventListener('sortie:auth', on);
    return () => window.removeEventListener('sortie:auth', on);
  }, []);
  return signedIn;
}

function Header() {
  const [me, setMe] = useState(null);
  useEffect(() => {
    whoami().then(setMe, () => setMe(null));
  }, []);
  return html`<header class="topbar">
    <a class="brand" href="#/" data-test="nav-tree">Sortie</a>
    <nav class="topnav" aria-label="Main">
      <a href="#/">Environments</a>
      <a href="#/?awaiting=1">Awaiting my approval</a>
    </nav>
    <div class="me">
      <span class="muted">Signed in as</span>${' '}
      <span class="subject" data-test="whoami">${me ? t(me.subject) : '…'}</span>
      <button type="button" class="button-quiet" data-test="signout" onClick=${() => signOut()}>Sign out</button>
    </div>
  </header>`;
}

function LocalSignIn({ onError }) {
  const [value, setValue] = useState('');
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    onError(null);
    try {
      await signInWithToken(value);
    } catch (err) {
      onError(err);
      setBusy(false);
    }
  };
  return html`<form class="signin-form" onSubmit=${submit}>
    <p>Paste a token printed by <code>sortie dev</code>: its development token, or the token of a
      user it was started with (<code>sortie dev --user NAME</code>).</p>
    <label for="signin-token">Token</label>
    <input id="signin-token" data-test="signin-token" type="password" autocomplete="off" spellcheck=${false}
      value=${value} onInput=${(e) => setValue(e.currentTarget.value)} required />
    <button type="submit" class="button-primary" data-test="signin-submit" disabled=${busy}>Sign in</button>
  </form>`;
}

function OidcSignIn({ onError }) {
  const [busy, setBusy] = useState(false);
  const go = async () => {
    setBusy(true);
    onError(null);
    try {
      await signInOidc();
    } catch (err) {
      onError(err);
      setBusy(false);
    }
  };
  return html`<div class="signin-form">
    <p>Sign in with your organisation's identity provider (${t(config().issuer)}).</p>
    <button type="button" class="button-primary" data-test="signin-oidc" disabled=${busy} onClick=${go}>Sign in</button>
  </div>`;
}

function SignInPage({ initialError }) {
  const [error, setError] = useState(initialError || null);
  const [notice] = useState(() => takeNotice());
  const mode = config().mode;
  return html`<main class="page signin-page" data-test="signin-page" data-loaded="true">
    <div class="card signin-card">
      <h1>Sortie console</h1>
      ${notice && html`<p class="banner banner-info">${t(notice)}</p>`}
      <${ErrorBanner} error=${error} />
      ${mode === 'local' && html`<${LocalSignIn} onError=${setError} />`}
      ${mode === 'oidc' && html`<${OidcSignIn} onError=${setError} />`}
      ${mode === 'unconfigured' && html`<div class="banner banner-info" data-test="signin-unconfigured">
        <p>Console sign-in is not configured: the deployment names no OpenID Connect client for the console.</p>
        <p>Set the template's <code>ConsoleClientId</code> parameter to a client of the issuer the API trusts,
          with this page's address as its redirect URI. The CLI and the API work without it.</p>
      </div>`}
    </div>
  </main>`;
}

function Missing() {
  return html`<main class="page" data-test="missing-page" data-loaded="true">
    <h1>Not found</h1><p>This console has no such page. <a href="#/">Back to the environments.</a></p>
  </main>`;
}

function Page({ route }) {
  switch (route.name) {
    case 'tree':
      return html`<${TreePage} key=${route.params.toString()} params=${route.params} />`;
    case 'env':
      return html`<${EnvPage} key=${route.path} path=${route.path} />`;
    case 'group':
      return html`<${GroupPage} key=${route.path} group=${route.path} />`;
    case 'job':
      return html`<${JobPage} key=${route.id} id=${route.id} />`;
    case 'audit':
      return html`<${AuditPage} key=${route.org} org=${route.org} params=${route.params} />`;
    default:
      return html`<${Missing} />`;
  }
}

function App({ bootError }) {
  const hash = useHash();
  const signedIn = useSignedIn();
  const route = parseRoute(hash);
  useEffect(() => {
    if (!signedIn && route.name !== 'signin') {
      sessionStorage.setItem(BACK_KEY, location.hash || '#/');
      location.replace('#/signin');
    } else if (signedIn && route.name === 'signin') {
      const back = sessionStorage.getItem(BACK_KEY);
      sessionStorage.removeItem(BACK_KEY);
      location.replace(back && back !== '#/signin' ? back : '#/');
    }
  }, [signedIn, route.name]);
  if (!signedIn) return html`<${SignInPage} initialError=${bootError} />`;
  if (route.name === 'signin') return null;
  return html`<div class="shell">
    <${Header} />
    <${Page} route=${route} />
  </div>`;
}

async function boot() {
  let bootError = null;
  try {
    await completeOidcRedirect();
  } catch (e) {
    bootError = e instanceof ApiError ? e : new ApiError(0, 'oidc', String(e), []);
  }
  const root = document.getElementById('app');
  root.textContent = '';
  render(html`<${App} bootError=${bootError} />`, root);
}

boot();
