/* The labelling page of `rageval annotate`: one record at a time from the JSON API.
 * Plain ES2017 with no dependencies. Records are untrusted: every text goes in with
 * textContent, never as markup. The page's Content-Security-Policy lets this script (by its
 * hash) run and talk to its own server, nothing else. */
(function () {
  'use strict';

  var token = new URLSearchParams(window.location.search).get('token') || '';
  var state = { current: null, history: [], index: -1, busy: false, done: false };

  function $(id) { return document.getElementById(id); }

  function clear(node) {
    while (node.firstChild) { node.removeChild(node.firstChild); }
  }

  function element(tag, text, className) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    if (className) { node.className = className; }
    return node;
  }

  function say(text, isError) {
    var box = $('message');
    box.textContent = text || '';
    box.className = isError ? 'error' : '';
  }

  async function api(method, path, body, params) {
    var query = '?token=' + encodeURIComponent(token);
    Object.keys(params || {}).forEach(function (key) {
      query += '&' + encodeURIComponent(key) + '=' + encodeURIComponent(params[key]);
    });
    var options = { method: method, headers: {}, credentials: 'same-origin', cache: 'no-store' };
    if (body !== undefined) {
      options.headers['Content-Type'] = 'application/json';
      options.body = JSON.stringify(body);
    }
    var response = await fetch(path + query, options);
    var data = {};
    try { data = await response.json(); } catch (error) { data = { error: response.statusText }; }
    if (!response.ok) { throw new Error(data.error || ('HTTP ' + response.status)); }
    return data;
  }

  function showProgress(progress, annotator) {
    if (annotator) { $('annotator').textContent = annotator; }
    if (!progress) { return; }
    var text = 'labelled ' + progress.labelled + ' · left ' + progress.left + ' of ' + progress.total;
    if (progress.skipped) { text += ' · skipped ' + progress.skipped; }
    $('progress').textContent = text;
  }

  function renderContexts(contexts) {
    var box = $('contexts');
    clear(box);
    if (!contexts || contexts.length === 0) { box.appendChild(element('p', 'none', 'muted')); }
    (contexts || []).forEach(function (context, i) {
      var details = element('details');
      details.open = true;
      details.appendChild(element('summary', '[' + (i + 1) + '] ' + context.id));
      details.appendChild(element('div', context.text, 'text'));
      box.appendChild(details);
    });
  }

  function renderScale(record) {
    var list = $('scale');
    clear(list);
    record.scale.values.forEach(function (value) {
      var item = element('li');
      var button = element('button');
      button.type = 'button';
      button.dataset.value = String(value);
      if (record.label === value) { button.className = 'chosen'; }
      button.appendChild(element('kbd', value));
      button.appendChild(document.createTextNode(' ' + (record.scale.anchors[String(value)] || '')));
      button.addEventListener('click', function () { label(value); });
      item.appendChild(button);
      list.appendChild(item);
    });
  }

  function render(record) {
    state.current = record;
    state.done = false;
    $('done').hidden = true;
    $('main').hidden = false;
    $('metric').textContent = record.metric;
    $('record-id').textContent = record.id;
    var labelled = record.label !== undefined && record.label !== null;
    $('record-state').textContent = labelled ? '(your label: ' + record.label + ')' : '';
    $('query').textContent = record.query || '';
    renderContexts(record.contexts);
    $('answer').textContent = record.answer || '';
    var hasReference = record.reference !== null && record.reference !== undefined;
    $('reference-block').hidden = !hasReference;
    $('reference').textContent = hasReference ? record.reference : '';
    $('judge-block').hidden = !record.judge;
    $('judge-score').textContent = record.judge ? String(record.judge.score) : '';
    $('judge-reasoning').textContent = record.judge ? (record.judge.reasoning || '') : '';
    $('criterion').textContent = record.criterion || '';
    renderScale(record);
    showProgress(record.progress, record.annotator);
  }

  function remember(id) {
    var at = state.history.indexOf(id);
    if (at < 0) { state.history.push(id); at = state.history.length - 1; }
    state.index = at;
  }

  async function run(task) {
    if (state.busy) { return; }
    state.busy = true;
    try { await task(); } catch (error) { say(error.message, true); }
    state.busy = false;
  }

  async function loadNext() {
    var data = await api('GET', '/api/next');
    if (data.done) {
      state.current = null;
      state.done = true;
      state.index = state.history.length;
      $('main').hidden = true;
      $('done').hidden = false;
      if (data.metric) { $('metric').textContent = data.metric; }
      showProgress(data.progress, data.annotator);
      return;
    }
    remember(data.id);
    render(data);
  }

  async function loadRecord(id) {
    render(await api('GET', '/api/record', undefined, { id: id }));
  }

  function label(value) {
    var record = state.current;
    if (!record) { return; }
    run(async function () {
      await api('POST', '/api/label', { id: record.id, metric: record.metric, label: value });
      say('labelled ' + record.id + ': ' + value);
      await loadNext();
    });
  }

  function skip() {
    var record = state.current;
    if (!record) { return; }
    run(async function () {
      await api('POST', '/api/skip', { id: record.id, metric: record.metric });
      say('skipped ' + record.id + ': it comes back at the end');
      await loadNext();
    });
  }

  function undo() {
    run(async function () {
      var data = await api('POST', '/api/undo', {});
      say('took back the label of ' + data.line.id);
      await loadNext();
    });
  }

  function move(step) {
    var target = state.index + step;
    if (target < 0) { return; }
    run(async function () {
      if (target < state.history.length) {
        state.index = target;
        await loadRecord(state.history[target]);
      } else if (!state.done) {
        await loadNext();
      }
      say('');
    });
  }

  function keyValue(key) {
    var record = state.current;
    if (!record || !/^[0-9]$/.test(key)) { return null; }
    var value = Number(key);
    return record.scale.values.indexOf(value) >= 0 ? value : null;
  }

  document.addEventListener('keydown', function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    var value = keyValue(event.key);
    if (value !== null) { label(value); } else if (event.key === 's') { skip(); } else if (event.key === 'u') { undo(); } else if (event.key === 'ArrowLeft') { move(-1); } else if (event.key === 'ArrowRight') { move(1); } else { return; }
    event.preventDefault();
  });
  $('skip').addEventListener('click', skip);
  $('undo').addEventListener('click', undo);
  run(loadNext);
}());
