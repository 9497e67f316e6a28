// toolslim dashboard: polls /stats and renders it. Plain ES2020, no dependencies, no build.
// Every number is written into an element whose data-stat attribute names its snapshot path,
// so tests (and people) can check the page against /stats field by field.
'use strict';

(() => {
  const STATS_URL = '/stats';
  const POLL_MS = 3000;
  const TIMEOUT_MS = 10000;
  const TOKEN_KEY = 'toolslim.adminToken';
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const PRIMARY_COMPONENT = 'toolschema';
  const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'];
  // The kinds of catalogue change (docs/drift.md), each with what to do about it.
  const DRIFT_KINDS = [
    ['order_only', 'pin the order: add toolorder to the pipeline'],
    ['added', 'let MCP servers connect before the first request'],
    ['removed', 'a server went away: check it stays connected'],
    ['changed', 'a tool text changes (dates, sets): fix the server'],
    ['mixed', 'several of the above at once'],
  ];

  // data-format -> how a snapshot value is shown (documented in docs/stats.md).
  const FORMATS = {
    int: { scale: 1, digits: 0 },
    ms: { scale: 1000, digits: 2 },
    ms0: { scale: 1000, digits: 0 },
    dec1: { scale: 1, digits: 1 },
    dec2: { scale: 1, digits: 2 },
    dec4: { scale: 1, digits: 4 },
  };
  const numberFormats = {};
  for (const [name, f] of Object.entries(FORMATS)) {
    numberFormats[name] = new Intl.NumberFormat('en-US', {
      minimumFractionDigits: f.digits,
      maximumFractionDigits: f.digits,
    });
  }
  const compact = new Intl.NumberFormat('en-US', { notation: 'compact', maximumFractionDigits: 1 });

  const $ = (selector) => document.querySelector(selector);
  let timer = null;
  let inflight = false;
  let locked = false;
  let lastSnapshot = null;
  let memoryToken = null; // used when sessionStorage is unavailable

  // ---- small DOM helpers (textContent only: names in the snapshot are data, never markup)

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined) continue;
      if (key === 'text') node.textContent = value;
      else node.setAttribute(key, value);
    }
    for (const child of children) {
      if (child !== null && child !== undefined) node.append(child);
    }
    return node;
  }

  function svg(tag, attrs) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === 'text') node.textContent = value;
      else node.setAttribute(key, String(value));
    }
    return node;
  }

  // A path segment that is data may contain "." or "%": escape them so paths split on ".".
  const escapeKey = (key) => String(key).replace(/%/g, '%25').replace(/\./g, '%2E');
  const pathOf = (...keys) => keys.map(escapeKey).join('.');

  function lookup(snapshot, path) {
    let value = snapshot;
    for (const segment of path.split('.')) {
      if (value === null || typeof value !== 'object') return undefined;
      value = value[decodeURIComponent(segment)];
    }
    return value;
  }

  const formatText = (value) => (typeof value === 'string' && value ? value : '—');

  function formatValue(value, format) {
    if (typeof value !== 'number' || !Number.isFinite(value)) return '—';
    const f = FORMATS[format] ? format : 'int';
    return numberFormats[f].format(value * FORMATS[f].scale);
  }

  const stat = (path, format = 'int') =>
    el('span', { 'data-stat': path, 'data-format': format, text: '—' });
  // A value that is text (a catalogue's name): data-text names its snapshot path.
  const textStat = (tag, path) => el(tag, { 'data-text': path, text: '—' });

  function humanBytes(n) {
    if (typeof n !== 'number' || n <= 0) return '';
    const units = ['B', 'kB', 'MB', 'GB', 'TB'];
    let i = 0;
    while (n >= 1000 && i < units.length - 1) {
      n /= 1000;
      i += 1;
    }
    return `(${n.toFixed(i === 0 ? 0 : 1)} ${units[i]})`;
  }

  function humanDuration(seconds) {
    if (typeof seconds !== 'number' || !Number.isFinite(seconds)) return '—';
    const s = Math.floor(seconds);
    const d = Math.floor(s / 86400);
    const h = Math.floor((s % 86400) / 3600);
    const m = Math.floor((s % 3600) / 60);
    if (d) return `${d}d ${h}h`;
    if (h) return `${h}h ${m}m`;
    if (m) return `${m}m ${s % 60}s`;
    return `${s}s`;
  }

  // One 24-hour clock, HH:MM:SS local time, for the header, the chart and the drift list:
  // written out, not left to the locale (en-US would say 1:04:05 PM in one place only).
  const two = (n) => String(n).padStart(2, '0');
  function clock(t) {
    const d = new Date(t * 1000);
    return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
  }

  // ---- status line and token form

  function setStatus(state, text) {
    const status = $('#status');
    status.dataset.state = state;
    $('#status-text').textContent = text;
    $('#content').classList.toggle('stale', state === 'error');
  }

  function readToken() {
    try {
      return sessionStorage.getItem(TOKEN_KEY);
    } catch {
      return null;
    }
  }

  function saveToken(token) {
    try {
      sessionStorage.setItem(TOKEN_KEY, token);
    } catch {
      // storage disabled: the token lives only as long as this page
    }
    memoryToken = token;
  }

  function clearToken() {
    try {
      sessionStorage.removeItem(TOKEN_KEY);
    } catch {
      // nothing stored
    }
    memoryToken = null;
  }

  const currentToken = () => readToken() || memoryToken;

  // `/dashboard#token=...` is accepted once, then removed from the address bar and history.
  function takeTokenFromHash() {
    const match = /^#token=(.+)$/.exec(location.hash);
    if (!match) return false;
    let token = match[1];
    try {
      token = decodeURIComponent(token);
    } catch {
      // not percent-encoded: use as is
    }
    saveToken(token);
    history.replaceState(null, '', location.pathname + location.search);
    return true;
  }

  // A #token=... pasted into an open tab does not reload the page: unlock in place.
  function onHashChange() {
    if (!takeTokenFromHash()) return;
    $('#auth').hidden = true;
    locked = false;
    poll();
  }

  function showAuth(message) {
    locked = true;
    const form = $('#auth');
    form.hidden = false;
    const error = $('#auth-error');
    error.hidden = !message;
    error.textContent = message || '';
    $('#token').focus();
  }

  function onAuthSubmit(event) {
    event.preventDefault();
    const token = $('#token').value.trim();
    if (!token) return;
    saveToken(token);
    $('#token').value = '';
    $('#auth').hidden = true;
    locked = false;
    setStatus('connecting', 'connecting…');
    poll();
  }

  // ---- rendering

  const byCountThenName = (a, b) => b[1] - a[1] || a[0].localeCompare(b[0]);

  function renderMeters(list, map) {
    const entries = Object.entries(map).sort(byCountThenName);
    const total = entries.reduce((sum, [, n]) => sum + n, 0);
    const base = list.dataset.map.split('.');
    list.replaceChildren();
    if (!entries.length) {
      list.append(el('li', { class: 'empty muted', text: 'none yet' }));
      return;
    }
    for (const [key, value] of entries) {
      const fill = el('span', { class: 'fill' });
      fill.style.width = `${total ? (100 * value) / total : 0}%`;
      list.append(
        el(
          'li',
          {},
          el('span', { class: 'name', text: key }),
          stat(pathOf(...base, key)),
          el('span', { class: 'meter', 'aria-hidden': 'true' }, fill),
        ),
      );
    }
  }

  function renderStatusChips(list, map) {
    const extra = Object.keys(map).filter((k) => !STATUS_CLASSES.includes(k));
    const keys = [...STATUS_CLASSES, ...extra];
    list.replaceChildren();
    for (const key of keys.filter((k) => k in map)) {
      list.append(
        el(
          'li',
          { class: `chip s${key.charAt(0)}` },
          el('span', { class: 'name', text: key }),
          stat(pathOf('requests', 'by_status', key)),
        ),
      );
    }
  }

  function chips(name, counters, field, title) {
    const entries = Object.entries(counters[field] || {}).sort(byCountThenName);
    if (!entries.length) return null;
    const list = el('ul', { class: 'chips' });
    for (const [key] of entries) {
      list.append(
        el(
          'li',
          { class: 'chip' },
          el('span', { class: 'name', text: key }),
          stat(pathOf('components', name, field, key)),
        ),
      );
    }
    return el('div', { class: 'chip-group' }, el('h4', { text: title }), list);
  }

  function renderComponents(snapshot) {
    const host = $('#components');
    host.replaceChildren();
    const names = Object.keys(snapshot.components || {});
    if (!names.length) {
      const text = 'No components configured: pure pass-through.';
      host.append(el('p', { class: 'muted', text }));
      return;
    }
    names.forEach((name, index) => {
      const counters = snapshot.components[name];
      const runs = counters.applied + counters.skipped + counters.error;
      const path = (...keys) => pathOf('components', name, ...keys);
      const outcomes = el('div', { class: 'outcomes', 'aria-hidden': 'true' });
      for (const outcome of ['applied', 'skipped', 'error']) {
        const part = el('span', { class: outcome });
        part.style.width = `${runs ? (100 * counters[outcome]) / runs : 0}%`;
        outcomes.append(part);
      }
      const tile = (label, cls, values, hint) =>
        el(
          'div',
          { class: cls || null },
          el('dt', { text: label }),
          el('dd', {}, ...values, hint ? el('span', { class: 'hint', text: hint }) : null),
        );
      const share = (part, whole) =>
        whole > 0 ? `${((100 * part) / whole).toFixed(1)}% of the catalogue` : null;
      host.append(
        el(
          'article',
          { class: 'component' },
          el(
            'div',
            { class: 'component-head' },
            el('h3', { text: name }),
            el('span', { class: 'muted', text: `step ${index + 1} · ${runs} runs` }),
          ),
          outcomes,
          el(
            'dl',
            { class: 'kv tiles' },
            tile('Applied', 'o-applied', [stat(path('applied'))]),
            tile('Skipped', 'o-skipped', [stat(path('skipped'))]),
            tile('Errors', 'o-error', [stat(path('error'))]),
            tile('Tools changed / seen', null, [
              stat(path('tools_changed')), ' / ', stat(path('tools_seen')),
            ]),
            tile('Bytes saved', 'saved', [stat(path('bytes_saved'))],
              share(counters.bytes_saved, counters.catalogue_bytes_before)),
            tile('Tokens saved', 'saved', [stat(path('tokens_saved'))],
              share(counters.tokens_saved, counters.catalogue_tokens_before)),
            tile('Catalogue bytes before → after', 'pair', [
              stat(path('catalogue_bytes_before')), ' → ', stat(path('catalogue_bytes_after')),
            ]),
            tile('Catalogue tokens before → after', 'pair', [
              stat(path('catalogue_tokens_before')), ' → ', stat(path('catalogue_tokens_after')),
            ]),
          ),
          chips(name, counters, 'skip_reasons', 'Skip reasons'),
          chips(name, counters, 'removed', 'Keywords removed'),
        ),
      );
    });
  }

  // One banner per advisory that requests carried, with its fix (the text is data).
  function renderAdvice(snapshot) {
    const host = $('#advice');
    host.replaceChildren();
    for (const [name, advice] of Object.entries(snapshot.advice || {})) {
      if (!advice.requests) continue;
      host.append(
        el(
          'div',
          { class: 'banner', role: 'alert', 'data-advice': name },
          el(
            'p',
            { class: 'banner-head' },
            el('strong', { text: name }),
            ' · ',
            stat(pathOf('advice', name, 'requests')),
            ' requests',
          ),
          el('p', { class: 'fix', text: advice.fix }),
          name === 'unused_mcp_server' ? unusedServers(snapshot, advice) : null,
        ),
      );
    }
    // And one per lint rule that requests broke: its newest finding's tool, server and fix.
    const lint = snapshot.lint || { rules: {}, findings: [] };
    for (const [rule, counts] of Object.entries(lint.rules)) {
      if (!counts.requests) continue;
      const f = lint.findings.find((finding) => finding.rule === rule);
      const text = f ? `${f.tool} (server ${f.server}): ${f.detail}. ${f.fix}` : '';
      host.append(
        el(
          'div',
          { class: 'banner', role: 'alert', 'data-lint': rule },
          el(
            'p',
            { class: 'banner-head' },
            el('strong', { text: `${rule} (${counts.severity})` }),
            ' · ',
            stat(pathOf('lint', 'rules', rule, 'requests')),
            ' requests',
          ),
          el('p', { class: 'fix', text }),
        ),
      );
    }
    host.hidden = !host.children.length;
  }

  function renderDrift(snapshot) {
    const drift = snapshot.drift;
    const kinds = $('#drift-kinds');
    kinds.replaceChildren();
    if (!drift) return;
    for (const [kind, advice] of DRIFT_KINDS) {
      kinds.append(
        el(
          'tr',
          {},
          el('th', { scope: 'row', text: kind }),
          el('td', {}, stat(pathOf('drift', 'changes', kind))),
          el('td', {}, stat(pathOf('drift', 'cache_write_tokens_after', kind))),
          el('td', { class: 'muted', text: advice }),
        ),
      );
    }
    const recent = $('#drift-recent');
    recent.replaceChildren();
    const events = [...(drift.recent || [])].reverse();
    if (!events.length) {
      recent.append(el('li', { class: 'empty muted', text: 'no catalogue changes yet' }));
      return;
    }
    const part = (label, value) => {
      if (!value) return null;
      return el('span', { class: 'part' }, el('span', { class: 'muted', text: label }), value);
    };
    for (const event of events) {
      recent.append(
        el(
          'li',
          { 'data-drift': event.kind },
          el('time', { text: clock(event.time) }),
          el('strong', { class: 'kind', text: event.kind }),
          el('span', { class: 'muted', text: event.api }),
          part('session ', el('code', { text: event.session })),
          part('tools ', event.tools.join(', ')),
          part('servers ', event.servers.join(', ')),
          part('cache-write tokens ', numberFormats.int.format(event.cache_write_tokens_after)),
        ),
      );
    }
  }

  // The APIs whose model calls carried a catalogue, the busiest first: each has its own
  // break-even, for the catalogue its calls carry most (cache.by_api.<api>, the first).
  function breakEvenApis(snapshot) {
    const byApi = (snapshot.cache && snapshot.cache.by_api) || {};
    const requests = snapshot.requests.by_api || {};
    return Object.keys(byApi)
      .filter((api) => byApi[api].length)
      .sort((a, b) => (requests[b] || 0) - (requests[a] || 0) || a.localeCompare(b));
  }

  function renderBreakEven(snapshot) {
    const apis = breakEvenApis(snapshot);
    const top = (api, key) => pathOf('cache', 'by_api', api, '0', key);
    const big = $('#break-even');
    const said = $('#break-even-for');
    if (apis.length) {
      const [api] = apis;
      big.dataset.stat = top(api, 'warm_break_even_requests');
      const more = apis.length - 1;
      said.replaceChildren(
        'for ', el('strong', { text: api }), "'s most requested catalogue ",
        textStat('code', top(api, 'catalogue')),
        ' · ', stat(top(api, 'tools')), ' tools · ', stat(top(api, 'requests')), ' calls',
        more ? ` (${more} more API${more > 1 ? 's' : ''} below)` : '',
      );
    } else {
      big.dataset.stat = 'cache.warm_break_even_requests';
      const none = 'to repay one cache re-anchor, for the latest compacted catalogue';
      said.replaceChildren(none);
    }
    const rows = $('#break-even-by-api');
    rows.replaceChildren();
    if (!apis.length) {
      const none = 'no model call carried a catalogue yet';
      rows.append(el('tr', {}, el('td', { colspan: '4', class: 'muted', text: none })));
    }
    for (const api of apis) {
      rows.append(
        el(
          'tr',
          { 'data-api': api },
          el(
            'th',
            { scope: 'row' },
            el('span', { class: 'api', text: api }),
            el(
              'span',
              { class: 'catalogue muted' },
              textStat('code', top(api, 'catalogue')), ' · ', stat(top(api, 'tools')), ' tools',
            ),
          ),
          el('td', {}, stat(top(api, 'requests'))),
          el(
            'td',
            {},
            stat(top(api, 'catalogue_tokens')), ' / ', stat(top(api, 'tokens_saved_per_request')),
          ),
          el('td', {}, stat(top(api, 'warm_break_even_requests'), 'dec1')),
        ),
      );
    }
  }

  // ---- what your tools cost (/stats tools): one row per (client, server), its unused tools
  // under it. An older /stats has no `tools`: the card says so instead of showing dashes.

  const TOOL_COLUMNS = ['tools', 'tokens / request', 'share of input', 'calls', 'cost today',
    'since the start'];
  const serverKey = (item) => `${item.client}/${item.server}`;

  // A request's input that one server's tools take: tokens_per_request over the mean input.
  function shareOfInput(server, tools) {
    const whole = tools.input_tokens_per_request;
    if (typeof whole !== 'number' || !(whole > 0)) return null;
    return server.tokens_per_request / whole;
  }

  // Dollars: cents, or four decimals below a cent (a server's cost today is often less than
  // a cent, which cents would show as nothing).
  const usdFormat = (value) => (value > 0 && value < 0.01 ? 'dec4' : 'dec2');
  const dollars = (snapshot, path) => stat(path, usdFormat(lookup(snapshot, path)));

  function money(snapshot, base) {
    return [
      el('span', { class: 'usd' }, '$', dollars(snapshot, pathOf(...base, 'usd'))),
      el('span', { class: 'eq muted' }, stat(pathOf(...base, 'equivalents')), ' tok-eq'),
    ];
  }

  function unusedRow(server, unused) {
    const mine = unused.filter(([, item]) => serverKey(item) === serverKey(server));
    if (!mine.length) return null;
    const list = el('ul', { class: 'chips unused-list' });
    for (const [j, item] of mine) {
      const title = `offered in ${item.requests} requests over ${item.sessions} sessions, never called`;
      list.append(
        el(
          'li',
          { class: 'chip', 'data-tool': item.tool, title },
          el('span', { class: 'name', text: item.tool }),
          stat(pathOf('tools', 'unused', j, 'tokens')),
        ),
      );
    }
    const more = server.unused_tools - mine.length;
    if (more > 0) list.append(el('li', { class: 'chip more muted', text: `+${more} more` }));
    return el(
      'tr',
      { class: 'unused-tools', 'data-unused-for': serverKey(server) },
      el(
        'td',
        { colspan: String(TOOL_COLUMNS.length + 1) },
        el('span', { class: 'muted', text: 'never called · tokens each: ' }),
        list,
      ),
    );
  }

  function renderTools(snapshot) {
    const tools = snapshot.tools;
    const rows = $('#tool-servers');
    const input = $('#tools-input');
    const notes = $('#tools-notes');
    rows.replaceChildren();
    notes.replaceChildren();
    const wide = TOOL_COLUMNS.length + 1;
    if (!tools || typeof tools !== 'object') {
      delete input.dataset.stat;
      input.textContent = '—';
      const older = 'this proxy\'s /stats has no tools section (an older toolslim): upgrade it ' +
        'to see what each tool and MCP server costs';
      rows.append(el('tr', {}, el('td', { colspan: String(wide), class: 'muted', text: older })));
      return;
    }
    input.dataset.stat = 'tools.input_tokens_per_request';
    input.dataset.format = 'int';
    const servers = tools.servers || [];
    if (!servers.length) {
      const none = 'no model call offered a tool yet';
      rows.append(el('tr', {}, el('td', { colspan: String(wide), class: 'muted', text: none })));
    }
    const unused = (tools.unused || []).map((item, j) => [j, item]);
    servers.forEach((server, i) => {
      const base = ['tools', 'servers', i];
      const share = shareOfInput(server, tools);
      const fill = el('span', { class: 'fill' });
      fill.style.width = `${share === null ? 0 : Math.min(100, 100 * share)}%`;
      const cell = (label, ...children) => el('td', { 'data-label': label }, ...children);
      const row = el(
        'tr',
        {
          class: server.unused ? 'server unused' : 'server',
          'data-server': server.server,
          'data-client': server.client,
        },
        el(
          'th',
          { scope: 'row' },
          el('span', { class: 'server-name', text: server.server }),
          el('span', { class: 'client muted', text: server.client }),
          server.unused ? el('span', { class: 'badge', text: 'unused' }) : null,
        ),
        cell(TOOL_COLUMNS[0], stat(pathOf(...base, 'tools'))),
        cell(TOOL_COLUMNS[1], stat(pathOf(...base, 'tokens_per_request'))),
        cell(
          TOOL_COLUMNS[2],
          el('span', {
            class: 'share',
            'data-share': pathOf(...base),
            text: share === null ? '—' : `${(100 * share).toFixed(1)}%`,
          }),
          el('span', { class: 'meter', 'aria-hidden': 'true' }, fill),
        ),
        cell(TOOL_COLUMNS[3], stat(pathOf(...base, 'calls'))),
        cell(TOOL_COLUMNS[4], ...money(snapshot, [...base, 'cost_today'])),
        cell(TOOL_COLUMNS[5], ...money(snapshot, [...base, 'cost'])),
      );
      const under = unusedRow(server, unused);
      rows.append(...(under ? [row, under] : [row]));
    });
    const said = [];
    const unknown = tools.unknown_calls || {};
    if (unknown.total) {
      said.push(el('span', {}, stat('tools.unknown_calls.total'),
        ' calls to tools their request did not offer'));
    }
    const unpriced = tools.unpriced || {};
    if (unpriced.requests) {
      const models = Object.keys(unpriced.models || {}).sort().join(', ');
      said.push(el('span', {}, stat('tools.unpriced.requests'),
        ` requests of models without a price (${models}): counted in tok-eq only`));
    }
    const misses = Object.entries(tools.cache_miss_reasons || {}).sort(
      (a, b) => b[1].missed_tokens - a[1].missed_tokens || a[0].localeCompare(b[0]),
    );
    if (misses.length) {
      const part = el('span', { class: 'cache-misses' }, 'cache misses the provider named: ');
      misses.forEach(([reason], k) => {
        const base = ['tools', 'cache_miss_reasons', reason];
        part.append(
          k ? ', ' : '',
          el('code', { text: reason }), ' ', stat(pathOf(...base, 'requests')), '× (',
          stat(pathOf(...base, 'missed_tokens')), ' tokens)',
        );
      });
      said.push(part);
    }
    if (servers.length) {
      said.push(el('span', {}, 'tok-eq: input tokens at the uncached price (a cache read ',
        stat('cache.read_multiplier', 'dec2'), '×, a write ',
        stat('cache.write_multiplier', 'dec2'), '×)'));
    }
    said.forEach((part, k) => notes.append(k ? ' · ' : '', part));
  }

  // The servers the unused_mcp_server advisory is about, under its banner: each with what it
  // costs and how to turn it off (advice.unused_mcp_server.servers), else from tools.servers.
  function unusedServers(snapshot, advice) {
    const list = el('ul', { class: 'banner-list' });
    const named = Array.isArray(advice.servers) ? advice.servers : null;
    const rows = named || ((snapshot.tools && snapshot.tools.servers) || []);
    rows.forEach((server, i) => {
      if (!named && !server.unused) return;
      const base = named ? ['advice', 'unused_mcp_server', 'servers', i] : ['tools', 'servers', i];
      const perDay = named && server.cost_per_day;
      list.append(
        el(
          'li',
          { 'data-server': server.server, 'data-client': server.client },
          el('strong', { text: server.server }),
          ` (${server.client}): `,
          stat(pathOf(...base, 'tokens_per_request')), ' tokens per request · $',
          perDay
            ? dollars(snapshot, pathOf(...base, 'cost_per_day', 'usd'))
            : dollars(snapshot, pathOf(...base, 'cost_today', 'usd')),
          perDay ? ' a day' : ' today',
          named && server.fix ? el('span', { class: 'server-fix', text: server.fix }) : null,
        ),
      );
    });
    return list.children.length ? list : null;
  }

  function primaryComponent(snapshot) {
    const names = Object.keys(snapshot.components || {});
    return names.includes(PRIMARY_COMPONENT) ? PRIMARY_COMPONENT : names[0];
  }

  function render(snapshot) {
    const primary = primaryComponent(snapshot);
    for (const node of document.querySelectorAll('[data-component-stat]')) {
      if (primary) node.dataset.stat = pathOf('components', primary, node.dataset.componentStat);
      else delete node.dataset.stat;
    }
    for (const node of document.querySelectorAll('[data-bytes-of]')) {
      const value = primary ? snapshot.components[primary][node.dataset.bytesOf] : null;
      node.textContent = humanBytes(value);
    }
    renderMeters($('#by-upstream'), snapshot.requests.by_upstream);
    renderMeters($('#by-api'), snapshot.requests.by_api);
    renderStatusChips($('#by-status'), snapshot.requests.by_status);
    renderComponents(snapshot);
    renderAdvice(snapshot);
    renderDrift(snapshot);
    renderBreakEven(snapshot);
    renderTools(snapshot);

    for (const node of document.querySelectorAll('[data-stat]')) {
      node.textContent = formatValue(lookup(snapshot, node.dataset.stat), node.dataset.format);
    }
    for (const node of document.querySelectorAll('[data-text]')) {
      node.textContent = formatText(lookup(snapshot, node.dataset.text));
    }

    const memo = snapshot.memo;
    const lookups = memo.hits + memo.misses;
    const rate = lookups ? `(${Math.round((100 * memo.hits) / lookups)}% hit rate)` : '';
    $('#memo-rate').textContent = rate;
    $('#uptime').textContent = humanDuration(snapshot.uptime_seconds);
    $('#schema-version').textContent = String(snapshot.version);
    $('#foot').hidden = false;
    drawChart(snapshot);
  }

  // The proxy's time when it made the snapshot: what the header's clock says.
  const snapshotTime = (snapshot) => snapshot.started_at + snapshot.uptime_seconds;

  // ---- chart: requests (bars) and tokens saved (line) per series interval, two panels

  // An axis top of 2, 4 or 10 times a power of ten keeps the middle gridline a whole number.
  function niceMax(value) {
    const v = Math.max(2, value);
    const magnitude = 10 ** Math.floor(Math.log10(v));
    for (const step of [1, 2, 4, 10]) {
      if (step * magnitude >= v) return step * magnitude;
    }
    return 10 * magnitude;
  }

  function drawChart(snapshot) {
    const host = $('#chart');
    const series = snapshot.series || { interval_seconds: 10, points: [] };
    const interval = series.interval_seconds || 10;
    const points = series.points || [];
    const width = Math.max(240, host.clientWidth);
    const height = width < 480 ? 200 : 240;
    let end = Math.floor(snapshotTime(snapshot) / interval) * interval;
    if (points.length) end = Math.max(end, points[points.length - 1].t);
    // From the interval the process started in (nothing can precede it), to now: at most
    // the 360 points /stats keeps.
    const born = Math.floor(snapshot.started_at / interval) * interval;
    const start = Math.max(end - 359 * interval, Math.min(born, end));
    const slots = Math.round((end - start) / interval) + 1;
    const requests = new Array(slots).fill(0);
    const tokens = new Array(slots).fill(0);
    let drawn = 0;
    for (const p of points) {
      const i = Math.round((p.t - start) / interval);
      if (i < 0 || i >= slots) continue;
      requests[i] = p.requests;
      tokens[i] = p.tokens_saved;
      drawn += 1;
    }

    const left = 44;
    const right = 8;
    const bottom = 20;
    const gap = 18;
    const panel = (height - bottom - gap - 8) / 2;
    const plotWidth = width - left - right;
    const slotWidth = plotWidth / slots;
    const x = (i) => left + (i + 0.5) * slotWidth;
    const root = svg('svg', {
      width,
      height,
      viewBox: `0 0 ${width} ${height}`,
      role: 'img',
      'aria-label': `Requests and tokens saved per ${interval} s, from ${clock(start)}`,
      'data-points': drawn,
      'data-slots': slots,
    });

    const labels = []; // drawn last, over the bars of the first slots
    const axis = (top, max, label) => {
      for (const fraction of [0, 0.5, 1]) {
        const y = top + panel - fraction * panel;
        root.append(svg('line', { class: 'grid', x1: left, x2: width - right, y1: y, y2: y }));
        const text = compact.format(max * fraction);
        const tick = { class: 'tick', x: left - 6, y: y + 4, 'text-anchor': 'end', text };
        root.append(svg('text', tick));
      }
      labels.push(svg('text', { class: 'panel-label', x: left + 4, y: top + 11, text: label }));
    };

    // Top panel: requests as bars.
    const top1 = 8;
    const maxRequests = niceMax(Math.max(...requests));
    axis(top1, maxRequests, 'requests');
    // A few slots (a proxy just started) make wide slots: a bar stays bar-shaped.
    const barWidth = Math.max(1, Math.min(48, slotWidth - (slotWidth > 4 ? 1 : 0)));
    requests.forEach((n, i) => {
      if (!n) return;
      const h = (n / maxRequests) * panel;
      const bar = svg('rect', {
        class: 'bar',
        x: left + i * slotWidth + (slotWidth - barWidth) / 2,
        y: top1 + panel - h,
        width: barWidth,
        height: h,
      });
      bar.append(svg('title', { text: `${clock(start + i * interval)} · ${n} requests` }));
      root.append(bar);
    });

    // Bottom panel: tokens saved as an area under a line.
    const top2 = top1 + panel + gap;
    const maxTokens = niceMax(Math.max(...tokens));
    axis(top2, maxTokens, 'tokens saved');
    const y2 = (n) => top2 + panel - (n / maxTokens) * panel;
    const base = top2 + panel;
    const coords = tokens.map((n, i) => `${x(i).toFixed(1)},${y2(n).toFixed(1)}`);
    root.append(
      svg('path', {
        class: 'area',
        d: `M${x(0).toFixed(1)},${base} L${coords.join(' L')} L${x(slots - 1).toFixed(1)},${base}Z`,
      }),
    );
    root.append(svg('polyline', { class: 'line', points: coords.join(' ') }));
    tokens.forEach((n, i) => {
      if (!n) return;
      const r = slotWidth > 6 ? 2.5 : 1.5;
      const dot = svg('circle', { class: 'dot', cx: x(i), cy: y2(n), r });
      dot.append(svg('title', { text: `${clock(start + i * interval)} · ${n} tokens saved` }));
      root.append(dot);
    });

    // Time axis: first, middle and last slot (fewer when there are fewer slots).
    const baseline = height - 5;
    for (const i of new Set([0, Math.floor((slots - 1) / 2), slots - 1])) {
      const last = i === slots - 1 && i > 0;
      const anchor = i === 0 ? 'start' : last ? 'end' : 'middle';
      const at = i === 0 ? left : last ? width - right : x(i);
      const label = clock(start + i * interval);
      const tick = { class: 'tick time', x: at, y: baseline, 'text-anchor': anchor, text: label };
      root.append(svg('text', tick));
    }

    root.append(...labels);
    if (!drawn) {
      root.append(
        svg('text', {
          class: 'empty',
          x: left + plotWidth / 2,
          y: top1 + panel / 2,
          'text-anchor': 'middle',
          text: 'No traffic yet',
        }),
      );
    }
    host.replaceChildren(root);
    $('#chart-interval').textContent = `· per ${interval} s`;
  }

  // ---- polling

  async function poll() {
    clearTimeout(timer);
    if (inflight || locked) return;
    inflight = true;
    const controller = new AbortController();
    const deadline = setTimeout(() => controller.abort(), TIMEOUT_MS);
    try {
      const headers = { Accept: 'application/json' };
      const token = currentToken();
      if (token) headers.Authorization = `Bearer ${token}`;
      const response = await fetch(STATS_URL, {
        headers,
        cache: 'no-store',
        credentials: 'same-origin',
        signal: controller.signal,
      });
      if (response.status === 401 || response.status === 403) {
        if (token) clearToken();
        $('#content').hidden = true;
        setStatus('auth', 'locked: admin token required');
        showAuth(token ? 'That token was not accepted. Try again.' : '');
        return;
      }
      if (!response.ok) throw new Error(`/stats answered HTTP ${response.status}`);
      const snapshot = await response.json();
      $('#content').hidden = false;
      render(snapshot);
      lastSnapshot = snapshot;
      setStatus('live', `live · updated ${clock(snapshotTime(snapshot))}`);
    } catch (error) {
      const timedOut = error && error.name === 'AbortError';
      const reason = timedOut ? 'request timed out' : (error && error.message) || String(error);
      setStatus('error', `error: ${reason}`);
    } finally {
      clearTimeout(deadline);
      inflight = false;
      if (!locked) timer = setTimeout(poll, POLL_MS);
    }
  }

  function start() {
    takeTokenFromHash();
    $('#auth').addEventListener('submit', onAuthSubmit);
    window.addEventListener('hashchange', onHashChange);
    let pending = false;
    window.addEventListener('resize', () => {
      if (pending || !lastSnapshot) return;
      pending = true;
      requestAnimationFrame(() => {
        pending = false;
        drawChart(lastSnapshot);
      });
    });
    document.addEventListener('visibilitychange', () => {
      if (document.visibilityState === 'visible') poll();
    });
    poll();
  }

  start();
})();
