// Runs before every other script of the report: records script errors, failed loads, blocked
// content and console.error calls into the page itself (#report-errors), so that a headless
// browser's DOM dump, or a reader, can see them.
(function () {
  'use strict';
  var errors = [];
  function show() {
    var box = document.getElementById('report-errors');
    if (!box) return;
    box.textContent = errors.join('\n');
    box.hidden = errors.length === 0;
    box.setAttribute('data-count', String(errors.length));
  }
  function record(kind, message) {
    errors.push(kind + ': ' + message);
    show();
  }
  window.addEventListener('error', function (event) {
    if (event.target && event.target !== window && event.target.tagName) {
      record('load failed', event.target.tagName.toLowerCase());
      return;
    }
    var where = event.filename ? ' (' + event.filename + ':' + event.lineno + ')' : '';
    record('error', (event.message || String(event.error)) + where);
  }, true);
  window.addEventListener('unhandledrejection', function (event) {
    record('unhandled rejection', String(event.reason));
  });
  document.addEventListener('securitypolicyviolation', function (event) {
    record('blocked by the content security policy',
           event.violatedDirective + ' ' + (event.blockedURI || 'inline'));
  });
  var consoleError = console.error;
  console.error = function () {
    record('console.error', Array.prototype.map.call(arguments, String).join(' '));
    return consoleError.apply(console, arguments);
  };
  window.cudal1ReportErrors = errors;
  document.addEventListener('DOMContentLoaded', show);
})();
