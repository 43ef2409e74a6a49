/* rageval HTML report: sortable and filterable tables, expandable long texts.
 *
 * Plain ES2017 with no dependencies and no network access. The page's Content-Security-Policy
 * allows this script by its hash only, so it must not use inline event handlers or eval.
 *
 * State of the records table can be given in the URL fragment, e.g.
 *   report.html#sort=ndcg%403:desc&q=revenue
 * and is written back there as the reader sorts and filters, so a view can be shared.
 */
(function () {
  "use strict";

  var collator = new Intl.Collator(undefined, {numeric: true, sensitivity: "base"});

  function isMissing(key) {
    return key === null || key === "";
  }

  /* The sort key of a cell: a number (null when unscored) or its text. */
  function cellKey(cell, numeric) {
    if (numeric) {
      var raw = cell.getAttribute("data-v");
      if (raw === null || raw === "") {
        return null;
      }
      var value = Number(raw);
      return Number.isNaN(value) ? null : value;
    }
    var text = cell.getAttribute("data-s");
    return (text === null ? cell.textContent : text).trim();
  }

  /* Missing values sort last in both directions: "unscored" is not "worst". */
  function compareKeys(a, b, numeric, descending) {
    if (isMissing(a)) {
      return isMissing(b) ? 0 : 1;
    }
    if (isMissing(b)) {
      return -1;
    }
    var order = numeric ? a - b : collator.compare(a, b);
    return descending ? -order : order;
  }

  function sortTable(table, th, descending) {
    var index = th.cellIndex;
    var numeric = th.getAttribute("data-type") === "num";
    var body = table.tBodies[0];
    var keyed = Array.prototype.map.call(body.rows, function (row, position) {
      return {row: row, key: cellKey(row.cells[index], numeric), position: position};
    });
    keyed.sort(function (x, y) {
      return compareKeys(x.key, y.key, numeric, descending) || x.position - y.position;
    });
    var fragment = document.createDocumentFragment();
    keyed.forEach(function (item) {
      fragment.appendChild(item.row);
    });
    body.appendChild(fragment);
    table.querySelectorAll("th[aria-sort]").forEach(function (other) {
      other.removeAttribute("aria-sort");
    });
    th.setAttribute("aria-sort", descending ? "descending" : "ascending");
  }

  function rowTexts(table) {
    return Array.prototype.map.call(table.tBodies[0].rows, function (row) {
      return {row: row, text: row.textContent.toLowerCase()};
    });
  }

  function applyFilter(table, texts, query, counter) {
    var needle = query.trim().toLowerCase();
    var shown = 0;
    texts.forEach(function (item) {
      var match = needle === "" || item.text.indexOf(needle) !== -1;
      item.row.hidden = !match;
      if (match) {
        shown += 1;
      }
    });
    table.setAttribute("data-shown", String(shown));
    if (counter) {
      counter.textContent = shown + " of " + texts.length + " rows";
    }
  }

  function readState() {
    var params = new URLSearchParams(window.location.hash.replace(/^#/, ""));
    return {sort: params.get("sort"), query: params.get("q")};
  }

  function writeState(table, filter) {
    var params = new URLSearchParams();
    var sorted = table.querySelector("th[aria-sort]");
    if (sorted) {
      var direction = sorted.getAttribute("aria-sort") === "descending" ? "desc" : "asc";
      params.set("sort", sorted.getAttribute("data-key") + ":" + direction);
    }
    if (filter && filter.value.trim() !== "") {
      params.set("q", filter.value);
    }
    var fragment = params.toString();
    try {
      window.history.replaceState(null, "", fragment ? "#" + fragment : window.location.pathname);
    } catch (error) {
      /* Some viewers forbid history changes on file:// pages; the view still works. */
    }
  }

  function findHeader(table, key) {
    return Array.prototype.find.call(table.tHead.rows[0].cells, function (th) {
      return th.getAttribute("data-key") === key;
    });
  }

  function setupSortable(table, onChange) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      if (!th.hasAttribute("data-type")) {
        return;
      }
      th.tabIndex = 0;
      var activate = function () {
        var current = th.getAttribute("aria-sort");
        /* Numbers start with the highest first, text with A first. */
        var descending = current === null
          ? th.getAttribute("data-type") === "num"
          : current === "ascending";
        sortTable(table, th, descending);
        onChange();
      };
      th.addEventListener("click", activate);
      th.addEventListener("keydown", function (event) {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          activate();
        }
      });
    });
  }

  function setupClips() {
    document.querySelectorAll(".clip").forEach(function (clip) {
      clip.tabIndex = 0;
      var toggle = function () {
        clip.classList.toggle("open");
      };
      clip.addEventListener("click", function () {
        if (!window.getSelection || String(window.getSelection()) === "") {
          toggle();
        }
      });
      clip.addEventListener("keydown", function (event) {
        if (event.key === "Enter") {
          toggle();
        }
      });
    });
  }

  function setupComponents() {
    var box = document.getElementById("show-components");
    if (!box) {
      return;
    }
    var update = function () {
      document.body.classList.toggle("show-components", box.checked);
    };
    box.addEventListener("change", update);
    update();
  }

  function setupRecords() {
    var table = document.getElementById("records-table");
    if (!table) {
      return;
    }
    var filter = document.getElementById("records-filter");
    var counter = document.getElementById("records-count");
    var texts = rowTexts(table);
    var onChange = function () {
      writeState(table, filter);
    };
    document.querySelectorAll("table.sortable").forEach(function (other) {
      setupSortable(other, other === table ? onChange : function () {});
    });
    var state = readState();
    if (state.sort) {
      var cut = state.sort.lastIndexOf(":");
      var key = cut === -1 ? state.sort : state.sort.slice(0, cut);
      var descending = cut !== -1 && state.sort.slice(cut + 1) === "desc";
      var th = findHeader(table, key);
      if (th && th.hasAttribute("data-type")) {
        sortTable(table, th, descending);
      }
    }
    if (filter) {
      if (state.query) {
        filter.value = state.query;
      }
      filter.addEventListener("input", function () {
        applyFilter(table, texts, filter.value, counter);
        onChange();
      });
      applyFilter(table, texts, filter.value, counter);
    }
  }

  function init() {
    setupComponents();
    setupClips();
    if (document.getElementById("records-table")) {
      setupRecords();
    } else {
      document.querySelectorAll("table.sortable").forEach(function (table) {
        setupSortable(table, function () {});
      });
    }
    document.body.setAttribute("data-ready", "1");
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
