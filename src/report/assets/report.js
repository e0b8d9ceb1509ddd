// The report's own behaviour: sortable tables, syntax highlighting (highlight.js 9 to 11),
// charts (Chart.js 3 or 4). Data comes from the JSON block #report-data. Progress is written to
// #report-status (data-charts-expected, data-charts-drawn, data-highlighted) for readers and
// for the browser test.
(function () {
  'use strict';
  var status = document.getElementById('report-status');
  var data = JSON.parse(document.getElementById('report-data').textContent);
  var charts = data.charts || [];
  var drawn = 0;
  var highlighted = 0;

  function showStatus() {
    status.setAttribute('data-charts-expected', String(charts.length));
    status.setAttribute('data-charts-drawn', String(drawn));
    status.setAttribute('data-highlighted', String(highlighted));
    var chartText = window.Chart ? drawn + ' of ' + charts.length + ' charts drawn'
                                 : 'charts not drawn (Chart.js is not available)';
    var codeText = window.hljs ? highlighted + ' code blocks highlighted so far'
                               : 'code not highlighted (highlight.js is not available)';
    status.textContent = chartText + '; ' + codeText + '.';
  }

  // ---- Sortable tables: click a header; empty cells stay last in both directions.
  function sortKey(cell, numeric) {
    var raw = cell.hasAttribute('data-value') ? cell.getAttribute('data-value') : cell.textContent;
    raw = raw.trim();
    if (raw === '') return null;
    if (!numeric) return raw.toLowerCase();
    var value = parseFloat(raw);
    return isNaN(value) ? null : value;
  }

  function sortTable(table, column, header) {
    var numeric = header.getAttribute('data-type') === 'number';
    var ascending = header.getAttribute('aria-sort') !== 'ascending';
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = sortKey(a.cells[column], numeric);
      var y = sortKey(b.cells[column], numeric);
      if (x === null || y === null) return x === null ? (y === null ? 0 : 1) : -1;
      var order = numeric ? x - y : x.localeCompare(y, undefined, {numeric: true});
      return ascending ? order : -order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (cell) {
      cell.removeAttribute('aria-sort');
    });
    header.setAttribute('aria-sort', ascending ? 'ascending' : 'descending');
  }

  document.querySelectorAll('table.sortable').forEach(function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (header, column) {
      header.classList.add('sort-header');
      header.tabIndex = 0;
      header.title = 'sort by this column';
      header.addEventListener('click', function () { sortTable(table, column, header); });
      header.addEventListener('keydown', function (event) {
        if (event.key === 'Enter' || event.key === ' ') {
          event.preventDefault();
          sortTable(table, column, header);
        }
      });
    });
  });

  // ---- Syntax highlighting: code that is visible now, the rest when its <details> opens.
  function highlightIn(root) {
    if (!window.hljs) return;
    var highlight = window.hljs.highlightElement || window.hljs.highlightBlock;
    root.querySelectorAll('pre > code.language-python:not([data-highlighted])').forEach(
        function (block) {
          var closed = block.closest('details:not([open])');
          if (closed) return;
          highlight.call(window.hljs, block);
          block.setAttribute('data-highlighted', 'yes');
          highlighted += 1;
        });
    showStatus();
  }
  document.querySelectorAll('details').forEach(function (details) {
    details.addEventListener('toggle', function () {
      if (details.open) highlightIn(details);
    });
  });

  // A link to a task or candidate opens its (closed) details.
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var target = id ? document.getElementById(id) : null;
    for (var node = target; node; node = node.parentElement) {
      if (node.tagName === 'DETAILS') node.open = true;
    }
    if (target) target.scrollIntoView();
  }
  window.addEventListener('hashchange', openTarget);

  // ---- Charts.
  function inkOf(canvas) {
    var context = canvas.getContext('2d');
    var pixels = context.getImageData(0, 0, canvas.width, canvas.height).data;
    var ink = 0;
    for (var i = 3; i < pixels.length; i += 4) {
      if (pixels[i] !== 0) ink += 1;
    }
    return ink;
  }

  var drawnMarker = {
    id: 'cudal1Drawn',
    afterRender: function (chart) {
      var canvas = chart.canvas;
      if (canvas.getAttribute('data-rendered') === 'yes') return;
      canvas.setAttribute('data-rendered', 'yes');
      canvas.setAttribute('data-ink', String(inkOf(canvas)));
      drawn += 1;
      showStatus();
    }
  };

  // Log axes: ticks labelled at 1, 2 and 5 times a power of ten only, bounds on such values.
  var NICE = [1, 2, 5];
  function niceParts(value) {
    var exponent = Math.floor(Math.log10(value) + 1e-9);
    return {exponent: exponent, mantissa: value / Math.pow(10, exponent)};
  }
  function speedupTick(value) {
    var parts = niceParts(value);
    var nice = NICE.some(function (m) { return Math.abs(parts.mantissa - m) < 1e-6; });
    return nice ? Number(value.toPrecision(3)) + '\u00d7' : '';
  }
  function niceBelow(value) {
    var parts = niceParts(value);
    var m = NICE.slice().reverse().find(function (n) { return n <= parts.mantissa + 1e-9; });
    return m * Math.pow(10, parts.exponent);
  }
  function niceAbove(value) {
    var parts = niceParts(value);
    var m = NICE.find(function (n) { return n >= parts.mantissa - 1e-9; });
    return m ? m * Math.pow(10, parts.exponent) : Math.pow(10, parts.exponent + 1);
  }
  function logBounds(values) {
    return {
      min: niceBelow(Math.min.apply(null, [0.5].concat(values.map(function (v) { return v * 0.9; })))),
      max: niceAbove(Math.max.apply(null, [2].concat(values.map(function (v) { return v * 1.1; }))))
    };
  }

  var referenceLine = {
    label: '1\u00d7 (as fast as the reference)',
    borderColor: '#888',
    borderDash: [6, 4],
    borderWidth: 1,
    pointRadius: 0,
    showLine: true,
    order: 3
  };

  function pointLabel(context) {
    var point = context.raw;
    var text = point.label ? point.label + ': ' : '';
    return text + Number(point.speedup !== undefined ? point.speedup : point.y).toFixed(3) + '\u00d7';
  }

  function ecdfConfig(spec) {
    var bounds = logBounds([spec.min_speedup, spec.max_speedup]);
    return {
      type: 'scatter',
      data: {
        datasets: [
          {
            label: 'share of verified tasks at or below this speedup',
            data: spec.points,
            showLine: true,
            // Chart.js's 'before' runs level to the next point, then steps: a value holds
            // until the next one.
            stepped: 'before',
            borderColor: '#2b6cb0',
            backgroundColor: '#2b6cb0',
            pointRadius: 4,
            order: 1
          },
          Object.assign({data: [{x: 1, y: 0}, {x: 1, y: 1}]}, referenceLine)
        ]
      },
      options: {
        animation: false,
        maintainAspectRatio: false,
        scales: {
          x: {type: 'logarithmic', min: bounds.min, max: bounds.max,
              title: {display: true, text: 'speedup over the reference (log scale)'},
              ticks: {callback: speedupTick}},
          y: {min: 0, max: 1, title: {display: true, text: 'fraction of verified tasks'}}
        },
        plugins: {
          title: {display: true, text: spec.title},
          legend: {display: false},  // the note above the charts explains them
          tooltip: {callbacks: {label: pointLabel}}
        }
      },
      plugins: [drawnMarker]
    };
  }

  function roundsConfig(spec) {
    var values = spec.candidates.map(function (p) { return p.y; }).concat(
        spec.best_so_far.map(function (p) { return p.y; }));
    var bounds = logBounds(values);
    var rounds = [];
    for (var round = spec.first_round; round <= spec.last_round; round += 1) rounds.push({value: round});
    return {
      type: 'scatter',
      data: {
        datasets: [
          {label: 'best verified speedup so far', data: spec.best_so_far, showLine: true,
           stepped: 'before', borderColor: '#2f855a', backgroundColor: '#2f855a', pointRadius: 5,
           borderWidth: 3, order: 1},
          {label: 'each verified candidate', data: spec.candidates, borderColor: '#2b6cb0',
           backgroundColor: 'rgba(43,108,176,0.45)', pointRadius: 4, order: 2},
          Object.assign({data: [{x: spec.first_round - 0.5, y: 1}, {x: spec.last_round + 0.5, y: 1}]},
                        referenceLine)
        ]
      },
      options: {
        animation: false,
        maintainAspectRatio: false,
        scales: {
          // Half a round of room on each side, so that points on the first and last round show.
          x: {type: 'linear', min: spec.first_round - 0.5, max: spec.last_round + 0.5,
              title: {display: true, text: 'round'},
              afterBuildTicks: function (scale) { scale.ticks = rounds; }},
          y: {type: 'logarithmic', min: bounds.min, max: bounds.max,
              title: {display: true, text: 'speedup over the reference (log scale)'},
              ticks: {callback: speedupTick}}
        },
        plugins: {
          title: {display: true, text: spec.title},
          tooltip: {callbacks: {label: pointLabel}}
        }
      },
      plugins: [drawnMarker]
    };
  }

  // Lines over steps (the training view): each series a line, with an optional band (its mean
  // plus and minus its spread) drawn as a filled area behind it.
  function withAlpha(color, alpha) {
    var n = parseInt(color.slice(1), 16);
    return 'rgba(' + (n >> 16) + ',' + ((n >> 8) & 255) + ',' + (n & 255) + ',' + alpha + ')';
  }

  function seriesConfig(spec) {
    var datasets = [];
    var values = [];
    spec.series.forEach(function (s) {
      if (s.band) {
        var edge = {borderWidth: 0, pointRadius: 0, pointHitRadius: 0, band: true, order: 5};
        datasets.push(Object.assign({label: s.label + ' + spread', fill: '+1',
                                     backgroundColor: withAlpha(s.color, 0.18),
                                     data: s.band.map(function (p) { return {x: p.x, y: p.high}; })},
                                    edge));
        datasets.push(Object.assign({label: s.label + ' - spread', fill: false,
                                     data: s.band.map(function (p) { return {x: p.x, y: p.low}; })},
                                    edge));
      }
      s.points.forEach(function (p) { values.push(p.y); });
      datasets.push({label: s.label, data: s.points, fill: false, stepped: spec.stepped ? 'before' : false,
                     borderColor: s.color, backgroundColor: s.color, pointRadius: 2, borderWidth: 2,
                     order: 1});
    });
    var y = {title: {display: true, text: spec.y_title}};
    if (spec.y_log) {
      var bounds = logBounds(values);
      Object.assign(y, {type: 'logarithmic', min: bounds.min, max: bounds.max,
                        ticks: {callback: speedupTick}});
    } else {
      y.type = 'linear';
      if (spec.y_min !== undefined) y.min = spec.y_min;
      if (spec.y_max !== undefined) y.max = spec.y_max;
    }
    return {
      type: 'line',
      data: {datasets: datasets},
      options: {
        animation: false,
        maintainAspectRatio: false,
        scales: {x: {type: 'linear', title: {display: true, text: spec.x_title}}, y: y},
        plugins: {
          title: {display: true, text: spec.title},
          legend: {labels: {filter: function (item, data) {
            return !data.datasets[item.datasetIndex].band;
          }}},
          tooltip: {filter: function (item) { return !item.dataset.band; },
                    callbacks: {label: function (context) {
                      var point = context.raw;
                      return (point.label ? point.label + ': ' : '') + Number(point.y).toFixed(3);
                    }}}
        }
      },
      plugins: [drawnMarker]
    };
  }

  function drawCharts() {
    charts.forEach(function (spec) {
      var canvas = document.getElementById(spec.canvas);
      if (!window.Chart) {
        canvas.parentElement.classList.add('chart-missing');
        canvas.parentElement.textContent = 'Chart not drawn: Chart.js is not available.';
        return;
      }
      var config = spec.type === 'rounds' ? roundsConfig(spec)
                 : spec.type === 'series' ? seriesConfig(spec) : ecdfConfig(spec);
      new window.Chart(canvas, config);
    });
  }

  showStatus();
  highlightIn(document);
  drawCharts();
  if (location.hash) openTarget();
  status.setAttribute('data-ready', 'yes');
  showStatus();
})();
