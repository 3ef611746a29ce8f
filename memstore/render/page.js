(function () {
  "use strict";
  var doc = document;
  doc.documentElement.classList.remove("no-js");
  var main = doc.getElementById("turns");
  var turns = Array.prototype.slice.call(doc.querySelectorAll("article.turn"));
  var count = turns.length;
  var parent = [], segment = [], tip = [], shown = [];
  turns.forEach(function (turn, index) {
    var toward = turn.getAttribute("data-t");
    parent.push(Number(turn.getAttribute("data-p")));
    segment.push(turn.getAttribute("data-s"));
    tip.push(toward === null ? index : Number(toward));
    shown.push(!turn.hidden);
  });
  var head = Number(main.getAttribute("data-head"));
  var selected = Number(main.getAttribute("data-shown"));
  var status = doc.getElementById("status");
  var cont = doc.getElementById("cont");
  var box = null;

  function pathTo(index) {
    var path = [];
    for (; index >= 0; index = parent[index]) path.push(index);
    return path.reverse();
  }

  function showBox(index, length) {
    if (box) box.hidden = true;
    box = doc.getElementById("f" + index);
    if (!box && tip[index] !== index && cont) {
      var more = pathTo(tip[index]).length - length;
      var link = cont.firstElementChild;
      link.setAttribute("href", "#n" + tip[index]);
      link.setAttribute("data-pick", String(tip[index]));
      link.textContent = "Continue this branch: " + more + " more turn" + (more === 1 ? "" : "s") + " \u203a";
      box = cont;
    }
    if (box) box.hidden = false;
  }

  function markSidebar(path, index) {
    var onPath = {};
    path.forEach(function (node) { onPath[segment[node]] = true; });
    doc.querySelectorAll(".side a[data-pick]").forEach(function (link) {
      var row = link.parentNode.getAttribute("data-seg");
      var isRow = row !== null;
      link.classList.toggle("on", isRow && onPath[row] === true);
      link.classList.toggle("current", isRow ? row === segment[index] : Number(link.getAttribute("data-pick")) === index);
    });
  }

  function describe(path, index) {
    var where = index === head ? "the head" : tip[index] === index ? "a branch tip" : "turn #" + path.length + " (the branch goes on)";
    return "Showing " + path.length + " turn" + (path.length === 1 ? "" : "s") + ", from the root to " + where + ".";
  }

  function select(index, scroll) {
    if (!(index >= 0 && index < count)) return;
    var path = pathTo(index), on = new Array(count), firstNew = -1, node;
    path.forEach(function (member) { on[member] = true; });
    for (node = 0; node < path.length; node++) {
      if (!shown[path[node]]) { firstNew = path[node]; break; }
    }
    for (node = 0; node < count; node++) {
      if (Boolean(on[node]) !== shown[node]) {
        shown[node] = Boolean(on[node]);
        turns[node].hidden = !shown[node];
      }
    }
    selected = index;
    showBox(index, path.length);
    markSidebar(path, index);
    if (status) status.textContent = describe(path, index);
    if (scroll) turns[firstNew >= 0 ? firstNew : index].scrollIntoView({ block: "start" });
  }

  function fromHash() {
    var match = /^#n(\d+)$/.exec(location.hash);
    return match ? Number(match[1]) : (head >= 0 ? head : Number(main.getAttribute("data-shown")));
  }

  function follow() {
    var index = fromHash();
    if (index !== selected) select(index, true);
  }

  doc.addEventListener("click", function (event) {
    var target = event.target;
    if (!target || !target.closest) return;
    var link = target.closest("a[data-pick]");
    if (link && event.button === 0 && !(event.ctrlKey || event.metaKey || event.shiftKey || event.altKey)) {
      var pick = link.getAttribute("data-pick");
      if (pick === "") return;
      event.preventDefault();
      try { history.pushState(null, "", "#n" + pick); } catch (error) { /* a sandboxed page */ }
      select(Number(pick), true);
      return;
    }
    var button = target.closest("button[data-fold]");
    if (button) {
      var open = button.getAttribute("data-fold") === "1";
      main.querySelectorAll("details").forEach(function (details) { details.open = open; });
    }
  });
  window.addEventListener("popstate", follow);
  window.addEventListener("hashchange", follow);
  if (/^#n\d+$/.test(location.hash)) follow(); else if (selected >= 0) select(selected, false);
})();
